"""Why a window differs: every (line, window) contribution the two sides disagree on, with a reason.

The truth counts a line in a window when the batch kept it as an event (valid, first copy in
the log prefix it read). The stream's contributions are rebuilt from what the stream itself
recorded about each line it read: a line it neither dead-lettered, nor called a duplicate, nor
sent to the side output for that window, is one it aggregated. Comparing the two sets of
``(segment, line_number, window)`` pairs gives the disagreements, and each gets one reason:

* ``late``: the stream routed the event to ``late_events`` (the watermark had closed the window);
* ``duplicate``: one side called the line a duplicate and the other counted it; in practice the
  stream counting a resent copy whose first copy it had forgotten (beyond its dedup horizon);
* ``dead_letter``: one side dead-lettered a line the other counted;
* ``unread``: the line lies beyond the log position one side had read (the stream's frontier,
  or the segment the batch recorded);
* ``moved``: both sides counted the line, in different windows (session windows: the stream
  had closed a session before the event that would have merged it with the next arrived).

A contribution the truth has and the stream lacks adds ``+1`` event and ``+amount`` to the
window's ``truth - stream`` delta; the reverse subtracts. Per window, the delta minus the sum
of the explained parts is ``unexplained``: a stream that lost or invented rows, or a table
edited by hand. It is zero whenever both sides did what they recorded.

Which lines to look at. With tumbling and sliding windows a line's windows depend on the line
alone, so a disagreement about a line needs one side not to count it (or, for the stream, to
have sent that pair to the side output): every disagreeing line is one a side recorded as a
duplicate, a dead letter or late, or one beyond the position of one side and not the other.
``disputed_lines`` reads exactly those, from the tables both sides wrote and the log segments
between the two positions, and ``explain_windows`` over them gives the same pairs, reasons and
figures as over the whole log. A session depends on every event of its key, so with session
windows the whole log is read.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from shared.aggregation import AMOUNT_TOTAL_TYPE, WINDOW_KEY
from shared.config import LabConfig
from shared.events import EVENT_COLUMNS, HEARTBEAT_FIELD, parse_events, valid_events
from shared.log_source import parsed_log, segment_stamps
from shared.partitions import DayRange
from shared.windows import KEY_COLUMNS, RULE_COLUMNS, WindowSpec, assign_windows

__all__ = ["REASONS", "LineRecords", "explain_both", "explain_windows", "disputed_lines", "parsed_log"]

REASONS = ("late", "duplicate", "dead_letter", "unread", "moved")
LINE = ["segment", "line_number"]
PAIR = LINE + ["window_start", "window_end"]


@dataclass(frozen=True)
class LineRecords:
    """What one side recorded about individual lines, and how far it read.

    ``duplicates`` / ``dead_letters`` / ``late``: frames with at least ``segment, line_number``
    (``late`` is empty for the batch side). ``last_segment``: the last segment the side read.
    ``windows``: the stream's session windows (``WINDOW_KEY``), needed with session windows only.
    """

    last_segment: int
    duplicates: DataFrame
    dead_letters: DataFrame
    late: DataFrame | None = None
    windows: DataFrame | None = None


def disputed_lines(
    spark: SparkSession,
    lake: str,
    batch: LineRecords,
    stream: LineRecords,
    spec: WindowSpec,
    *,
    max_clock_skew: int = LabConfig.max_clock_skew,
    max_line_bytes: int = LabConfig.max_line_bytes,
) -> DataFrame:
    """The lines a disagreement can be about (see the module docstring), as ``parse_events`` rows.

    Recorded events (duplicates, late events) come as recorded; dead letters are parsed again
    from their text and their segment's stamp (a side may have rejected a line the other accepted; a dead letter's text
    is already text: a line that was not, or was cut, is a dead letter again); the segments
    between the two positions are read from the log. Sessions: every line up to the further
    position. The settings are the sides' own (``max-clock-skew``, ``max-line-bytes``).
    """
    lake = str(lake)
    furthest, nearest = max(batch.last_segment, stream.last_segment), min(batch.last_segment, stream.last_segment)
    limits = {"max_clock_skew": max_clock_skew, "max_line_bytes": max_line_bytes}
    if spec.pick(fixed=False, merging=True):  # any line of a key can reshape its windows
        return parsed_log(spark, lake, furthest, **limits)
    recorded = [frame for frame in (stream.duplicates, stream.late, batch.duplicates) if frame is not None]
    rejected = [frame for frame in (stream.dead_letters, batch.dead_letters) if frame is not None]
    events = [
        frame.select(*EVENT_COLUMNS).select(
            "*",
            F.lit(None).cast("string").alias("raw_line"),
            F.lit(None).cast("string").alias("reject_reason"),
            F.lit(None).cast("string").alias("reject_detail"),
            F.lit(False).alias(HEARTBEAT_FIELD),
        )
        for frame in recorded
    ]
    texts = [
        frame.select("segment", "line_number", "raw_line", F.octet_length("raw_line").cast("long").alias("line_bytes"))
        for frame in rejected
    ]
    parsed = [*events]
    if texts:
        union = texts[0]
        for frame in texts[1:]:
            union = union.unionByName(frame)
        # a dead letter's row holds the line as sent; its ingest time may be its segment's stamp
        stamped = union.dropDuplicates(LINE).join(F.broadcast(segment_stamps(spark, lake, furthest)), "segment", "left")
        parsed.append(stamped.transform(parse_events, max_clock_skew=max_clock_skew))
    if furthest > nearest:
        parsed.append(parsed_log(spark, lake, furthest, first_segment=nearest + 1, **limits))
    lines = parsed[0]
    for frame in parsed[1:]:
        lines = lines.unionByName(frame)
    return lines.dropDuplicates(LINE)


def _lines(frame: DataFrame, last_segment: int) -> DataFrame:
    return frame.where(F.col("segment") <= last_segment).select(*LINE).distinct()


def _contributions(events: DataFrame, spec: WindowSpec, days: DayRange) -> DataFrame:
    return (
        events.select(*LINE, *RULE_COLUMNS, "amount")
        .transform(assign_windows(spec))
        .where(days.contains(F.col("window_start")))
        .select(*PAIR, "account_id", "currency", "amount")
    )


def _stream_sessions(aggregated: DataFrame, stream: LineRecords, spec: WindowSpec, days: DayRange) -> DataFrame:
    """Each aggregated line in the stream session whose events span ``[start, end - gap]`` holds it.

    A stream closes a session once the watermark passes its end; an event that would have
    bridged it to the next arrives late, so the stream may hold two sessions where the batch
    holds one, even overlapping as intervals. Their event spans never overlap (any event inside
    a closed session's span is late), so each line belongs to exactly one.
    """
    sessions = stream.windows.select(
        *KEY_COLUMNS, F.col("window_start").alias("_start"), F.col("window_end").alias("_end")
    )
    inside = [aggregated[k] == sessions[k] for k in KEY_COLUMNS] + [
        aggregated["event_time"] >= sessions["_start"],
        F.unix_micros(aggregated["event_time"]) <= F.unix_micros(sessions["_end"]) - F.lit(spec.gap),
    ]
    placed = aggregated.join(sessions, inside, "left").select(
        *[aggregated[c] for c in aggregated.columns],
        sessions["_start"].alias("window_start"),
        sessions["_end"].alias("window_end"),
    )
    # A line no session spans is one the stream lost: it still counts on the stream side in
    # a session of its own, so the loss shows as unexplained.
    lost = F.col("window_start").isNull()
    placed = placed.withColumn(
        "window_end",
        F.when(lost, F.timestamp_micros(F.unix_micros("event_time") + F.lit(spec.gap))).otherwise(F.col("window_end")),
    )
    placed = placed.withColumn("window_start", F.coalesce("window_start", "event_time"))
    return placed.where(days.contains(F.col("window_start"))).select(*PAIR, "account_id", "currency", "amount")


_STREAM_REASONS = ("late", "duplicate", "dead_letter")  # what the stream records of a line, in this order
_BATCH_REASONS = ("duplicate", "dead_letter")


def _dispositions(batch: LineRecords, stream: LineRecords) -> DataFrame:
    """What the two sides recorded of each line either recorded (up to its own position), one row
    a line: ``_stream_known`` and ``_batch_known``, the side's reason for it (the first of
    ``_STREAM_REASONS`` / ``_BATCH_REASONS`` it was recorded under; null: the side recorded nothing);
    ``_stream_dropped`` / ``_batch_dropped``, whether the side left it out of its windows (a
    duplicate or a dead letter); ``_stream_late``, whether the stream sent it to the side output.
    One small frame for every join of the attribution: each table of line records is read once."""
    parts = []
    for side, records, reasons in (
        ("stream", stream, zip(_STREAM_REASONS, (stream.late, stream.duplicates, stream.dead_letters))),
        ("batch", batch, zip(_BATCH_REASONS, (batch.duplicates, batch.dead_letters))),
    ):
        for rank, (reason, frame) in enumerate(reasons):
            if frame is not None:
                parts.append(
                    _lines(frame, records.last_segment).select(
                        *LINE, F.lit(side).alias("_side"), F.lit(rank).alias("_rank"), F.lit(reason).alias("_reason")
                    )
                )
    recorded = parts[0]
    for part in parts[1:]:
        recorded = recorded.unionByName(part)
    of = lambda side: F.col("_side") == side  # noqa: E731
    first = lambda side: F.min(F.when(of(side), F.struct("_rank", "_reason")))["_reason"]  # noqa: E731
    dropped = F.col("_reason").isin("duplicate", "dead_letter")
    return recorded.groupBy(*LINE).agg(  # every row of a group has a side and a reason: no null flag
        first("stream").alias("_stream_known"),
        first("batch").alias("_batch_known"),
        F.max(of("stream") & dropped).alias("_stream_dropped"),
        F.max(of("batch") & dropped).alias("_batch_dropped"),
        F.max(of("stream") & (F.col("_reason") == "late")).alias("_stream_late"),
    )


def _events(parsed: DataFrame, last_segment: int, known: DataFrame, dropped: str) -> DataFrame:
    """The valid events of ``parsed`` up to ``last_segment`` that a side did not drop (``dropped``:
    its flag in ``known``, ``_dispositions``' frame), with ``known``'s columns."""
    return (
        parsed.where(F.col("segment") <= last_segment)
        .transform(valid_events)
        .join(known, LINE, "left")
        .where(~F.coalesce(F.col(dropped), F.lit(False)))
    )


def _flags(truth: bool | Column, stream: bool | Column, corrected: bool | Column) -> list[Column]:
    as_column = lambda flag: flag if isinstance(flag, Column) else F.lit(flag)
    return [
        as_column(truth).alias("_truth"),
        as_column(stream).alias("_stream"),
        as_column(corrected).alias("_corrected"),
    ]


def _counted_pairs(
    parsed: DataFrame, known: DataFrame, batch: LineRecords, stream: LineRecords, spec: WindowSpec, days: DayRange
) -> DataFrame:
    """Every (line, window) pair a side counts, once: ``PAIR``, ``account_id``, ``currency``,
    ``amount`` and which sides count it: ``_truth``, ``_stream`` (the stream as it aggregated),
    ``_corrected`` (the stream with its side output folded in). ``known``: ``_dispositions``."""
    truth = _contributions(_events(parsed, batch.last_segment, known, "_batch_dropped"), spec, days)
    truth = truth.select("*", *_flags(True, False, False))
    accepted = _events(parsed, stream.last_segment, known, "_stream_dropped")
    corrected = _contributions(accepted, spec, days)
    if spec.pick(fixed=False, merging=True):  # the stream's sessions, not the batch's
        on_time = accepted.where(~F.coalesce(F.col("_stream_late"), F.lit(False)))
        aggregated = _stream_sessions(on_time, stream, spec, days)
        counted = corrected.select("*", *_flags(False, False, True)).unionByName(
            aggregated.select("*", *_flags(False, True, False))
        )
    else:  # the stream aggregated every accepted pair but those it sent to the side output
        late_pairs = (
            stream.late.where(F.col("segment") <= stream.last_segment)
            .select(*PAIR)
            .distinct()
            .withColumn("_late", F.lit(True))
        )
        counted = corrected.join(late_pairs, PAIR, "left").select(
            *corrected.columns, *_flags(False, F.col("_late").isNull(), True)
        )
    # a line's account, currency and amount are the same on every side: one parsed row per line
    return (
        truth.unionByName(counted)
        .groupBy(*PAIR, "account_id", "currency", "amount")
        .agg(*[F.max(flag).alias(flag) for flag in ("_truth", "_stream", "_corrected")])
    )


def _reason(records: LineRecords, known: str) -> Column:
    unread = F.col("segment") > F.lit(records.last_segment)
    return F.when(unread, "unread").otherwise(F.coalesce(F.col(known), F.lit("moved")))


def explain_both(
    parsed: DataFrame, batch: LineRecords, stream: LineRecords, spec: WindowSpec, days: DayRange
) -> DataFrame:
    """``explain_windows`` of both diffs in one plan: per window, diff and reason, the signed
    events and money explaining ``truth - stream`` (``corrected`` false) and ``truth -
    corrected stream`` (``corrected`` true; the side output folded in).

    Columns: ``WINDOW_KEY``, ``corrected``, ``reason`` (one of ``REASONS``), ``events``,
    ``money``. Each counted pair is read once for both diffs: a pair the truth counts and a diff's
    side lacks adds ``+1`` (its reason from what the stream recorded of the line); the reverse
    ``-1`` (from what the batch recorded).
    """
    known = _dispositions(batch, stream)
    pairs = _counted_pairs(parsed, known, batch, stream, spec, days)
    truth, aggregated, corrected = F.col("_truth"), F.col("_stream"), F.col("_corrected")
    sign = lambda counted: F.when(truth & ~counted, F.lit(1)).when(counted & ~truth, F.lit(-1)).cast("long")
    diffs = F.explode(
        F.array(
            F.struct(F.lit(False).alias("corrected"), sign(aggregated).alias("sign")),
            F.struct(F.lit(True).alias("corrected"), sign(corrected).alias("sign")),
        )
    )
    disagreed = (
        pairs.where(~(truth & aggregated & corrected))
        .join(known, LINE, "left")
        .select(*WINDOW_KEY, "segment", "amount", "_stream_known", "_batch_known", diffs.alias("_diff"))
        .where(F.col("_diff.sign").isNotNull())
    )
    sign_of = F.col("_diff.sign")
    reason = F.when(sign_of > 0, _reason(stream, "_stream_known")).otherwise(_reason(batch, "_batch_known"))
    return disagreed.groupBy(*WINDOW_KEY, F.col("_diff.corrected").alias("corrected"), reason.alias("reason")).agg(
        F.sum(sign_of).alias("events"),
        F.sum((F.col("amount") * sign_of).cast(AMOUNT_TOTAL_TYPE)).cast(AMOUNT_TOTAL_TYPE).alias("money"),
    )


def explain_windows(
    parsed: DataFrame,
    batch: LineRecords,
    stream: LineRecords,
    spec: WindowSpec,
    days: DayRange,
    *,
    fold_late: bool = False,
) -> DataFrame:
    """Per window and reason: the signed events and money explaining ``truth - stream``.

    Columns: ``WINDOW_KEY``, ``reason`` (one of ``REASONS``), ``events``, ``money``; only
    windows starting on ``days`` and only reasons that contribute. With ``fold_late`` the
    stream side is the corrected one (its side output folded back in), so what remains is why
    ``corrected_aggregates`` still differs from the truth: e.g. a resent copy whose first copy
    the stream had forgotten and which then arrived late (``duplicate``). ``explain_both`` gives
    both diffs in one plan.
    """
    both = explain_both(parsed, batch, stream, spec, days)
    return both.where(F.col("corrected") == F.lit(fold_late)).drop("corrected")

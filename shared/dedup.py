"""Deduplication by ``event_id``.

Producers retry: a resent event carries the same ``event_id`` (and, when the producer is
well-behaved, the same payload). The first copy in log order ``(segment, line_number)`` is the
event; every later copy is a duplicate. A later copy whose payload differs is still a
duplicate, but is flagged ``payload_conflict`` so that nobody mistakes a collision of ids for a
harmless retry. ``ingest_time`` is not payload: a retry lands later by nature.

The batch rule is written in Arrow (``mark_duplicates_table``) and, for Spark, as columns
(``mark_copies``: each copy against the least ``(segment, line_number)`` of its id), which a
test holds equal: run by Spark, the batch starts no Python worker and converts no row to Arrow.
Only ids seen more than once need it (``flag_repeated``: about 1% of a log's ids); a copy of an
id seen once is its own first copy and is marked where it is. ``split_copies_after`` gives the same marks to
the events of later segments alone, given the first copy of every id in the segments before.

The stream cannot remember every id forever. It remembers a first copy for ``dedup_horizon``
behind the watermark, counted from the later of its event time and the watermark it arrived
at (``remembered_from``: a resend that is itself late is remembered as long as any other): a
later copy whose watermark ``W`` (the clock's, ``shared.clock``) has passed ``remembered_from +
dedup_horizon`` is not recognised and becomes a first copy again (only the batch path, which
sees the whole log, counts the event once).
``deduplicate_stream`` applies this rule to lines in log order, given the first copies
remembered from before; the speed layer calls it on a micro-batch, the Kappa replay on every
copy of a set of ids at once (an empty memory), and both decide the same for every line.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql.types import BooleanType, LongType, StructField

from shared.clock import NO_TIME
from shared.events import EVENT_SCHEMA, UTC_MICROS

__all__ = [
    "parsed_counts",
    "PAYLOAD_COLUMNS",
    "MARK_FIELDS",
    "mark_duplicates_table",
    "mark_copies",
    "repeated_ids",
    "flag_repeated",
    "Copies",
    "split_copies",
    "split_copies_after",
    "mark_duplicates",
    "first_copies",
    "later_copies",
    "line_counts",
    "REMEMBERED_SCHEMA",
    "StreamDedup",
    "deduplicate_stream",
    "remembered_from",
    "remembered_from_column",
    "remembered_rows",
    "still_remembered",
]

REMEMBERED_SCHEMA = pa.schema([*EVENT_SCHEMA, pa.field("remembered_from", UTC_MICROS)])

PAYLOAD_COLUMNS = ("account_id", "event_type", "amount", "currency", "event_time")
MARK_FIELDS = (
    StructField("is_duplicate", BooleanType()),
    StructField("first_segment", LongType()),
    StructField("first_line_number", LongType()),
    StructField("payload_conflict", BooleanType()),
)


def mark_duplicates_table(events: pa.Table, payload: Sequence[str] = PAYLOAD_COLUMNS) -> pa.Table:
    """``events`` in log order with ``is_duplicate``, ``first_segment``, ``first_line_number``
    (the first copy of the row's id; its own position for a first copy) and ``payload_conflict``.

    Works on every copy of an id at once: the rows given are the whole history that counts.
    ``payload``: the columns a faithful resend repeats (the billing events' by default; another
    pipeline names its own). Payload columns of valid events are never null.
    """
    ordered = events.take(pc.sort_indices(events, sort_keys=[("segment", "ascending"), ("line_number", "ascending")]))
    ids = pc.dictionary_encode(ordered["event_id"].combine_chunks()).indices.to_numpy(zero_copy_only=False)
    _, first_row_of_id = np.unique(ids, return_index=True)  # codes follow first appearance
    first = pa.array(first_row_of_id[ids] if len(ids) else np.zeros(0, dtype=np.int64))
    is_duplicate = pa.array(first.to_numpy() != np.arange(len(ids)))
    differs = pa.array(np.zeros(len(ids), dtype=bool))
    for name in payload:
        differs = pc.or_(differs, pc.not_equal(ordered[name].take(first), ordered[name]))
    marks = {
        "is_duplicate": is_duplicate,
        "first_segment": ordered["segment"].take(first),
        "first_line_number": ordered["line_number"].take(first),
        "payload_conflict": pc.and_(is_duplicate, differs),
    }
    for name, column in marks.items():
        ordered = ordered.append_column(name, column)
    return ordered


def mark_copies(events: DataFrame, payload: Sequence[str] = PAYLOAD_COLUMNS) -> DataFrame:
    """``mark_duplicates_table`` as Spark columns: ``events`` (every copy of each id they hold)
    with ``MARK_FIELDS``, in no particular order.

    An id's first copy is its least ``(segment, line_number)`` (a line's position is unique);
    every other copy is a duplicate of it, ``payload_conflict`` when a ``payload`` column differs
    from the first copy's (never null on a valid event). One shuffle by ``event_id``.
    """
    first = F.min(F.struct("segment", "line_number", *payload)).over(Window.partitionBy("event_id"))
    marked = events.withColumn("_first", first)
    is_duplicate = (F.col("segment") != F.col("_first.segment")) | (F.col("line_number") != F.col("_first.line_number"))
    differs = functools.reduce(
        lambda left, right: left | right, [F.col(name) != F.col(f"_first.{name}") for name in payload], F.lit(False)
    )
    return marked.select(
        *events.columns,
        is_duplicate.alias("is_duplicate"),
        F.col("_first.segment").alias("first_segment"),
        F.col("_first.line_number").alias("first_line_number"),
        (is_duplicate & differs).alias("payload_conflict"),
    )


def repeated_ids(lines: DataFrame, events: str = "true") -> DataFrame:
    """``_id_hash``: the 64-bit hash of every ``event_id`` seen more than once among the rows of
    ``lines`` that are events (the SQL condition ``events``).

    A rare collision of hashes marks an id repeated that is not, which costs a little and changes
    nothing (its copies go through the rule, which finds each a first copy).
    """
    return (
        lines.where(events)
        .groupBy(F.xxhash64("event_id").alias("_id_hash"))
        .count()
        .where("count > 1")
        .select("_id_hash")
    )


def flag_repeated(lines: DataFrame, events: str = "true", repeated: DataFrame | None = None) -> DataFrame:
    """``lines`` with ``_repeated``: true on a row that is an event (``events``) whose id is in
    ``repeated`` (``repeated_ids(lines, events)`` unless given), null on every other row.

    The repeated hashes are broadcast to the tasks: they grow with the retries in the log (8
    bytes each), and no row of the log goes to the driver.
    """
    repeated = repeated_ids(lines, events) if repeated is None else repeated
    flags = F.broadcast(repeated.select("_id_hash", F.lit(True).alias("_repeated")))
    flagged = lines.withColumn("_id_hash", F.xxhash64("event_id")).join(flags, "_id_hash", "left").drop("_id_hash")
    return flagged.withColumn("_repeated", F.when(F.expr(events), F.col("_repeated")))


@dataclass(frozen=True)
class Copies:
    """A complete set of events split by whether their ``event_id`` repeats (``split_copies``).

    ``once``: the events of ids seen once, each its own first copy (they never go through the
    rule); ``repeated``: every copy of the other ids, marked by ``mark_copies``;
    ``ids``: the hashes of those ids (``repeated_ids``); ``earlier``: for events of later
    segments (``split_copies_after``), the earlier first copies of the ids they repeat.
    """

    ids: DataFrame
    once: DataFrame
    repeated: DataFrame
    earlier: DataFrame | None = None

    @property
    def marked(self) -> DataFrame:
        """Every event with ``MARK_FIELDS`` (``mark_duplicates_table``'s columns)."""
        once = self.once.select(
            "*",
            F.lit(False).alias("is_duplicate"),
            F.col("segment").alias("first_segment"),
            F.col("line_number").alias("first_line_number"),
            F.lit(False).alias("payload_conflict"),
        )
        return once.unionByName(self.repeated)

    @property
    def firsts(self) -> DataFrame:
        """The deduplicated events (``first_copies`` of ``marked``)."""
        return self.once.unionByName(self.repeated.transform(first_copies))

    @property
    def later(self) -> DataFrame:
        """The duplicates (``later_copies`` of ``marked``)."""
        return self.repeated.transform(later_copies)

    def persisted(self) -> Copies:
        """The same with ``ids``, ``repeated`` and ``earlier`` cached: the rule runs once, and
        ``once`` is a filter of the events (which the caller caches) however often it is read."""
        earlier = None if self.earlier is None else self.earlier.persist()
        return Copies(self.ids.persist(), self.once, self.repeated.persist(), earlier)

    @property
    def cached(self) -> tuple[DataFrame, ...]:
        """The frames ``persisted`` caches."""
        return (self.ids, self.repeated) + (() if self.earlier is None else (self.earlier,))

    def release(self) -> None:
        for frame in self.cached:
            frame.unpersist()


def split_copies(events: DataFrame, payload: Sequence[str] = PAYLOAD_COLUMNS) -> Copies:
    """``events`` (complete: every copy of every id) as ``Copies``: the copies of repeated ids
    marked by ``mark_copies`` (``payload``: as for ``mark_duplicates_table``), every other event
    marked where it is."""
    ids = repeated_ids(events)
    flagged = events.transform(flag_repeated, repeated=ids)
    repeated = F.coalesce(F.col("_repeated"), F.lit(False))
    contested = flagged.where(repeated).drop("_repeated")
    return Copies(ids=ids, once=flagged.where(~repeated).drop("_repeated"), repeated=mark_copies(contested, payload))


def split_copies_after(events: DataFrame, earlier: DataFrame, payload: Sequence[str] = PAYLOAD_COLUMNS) -> Copies:
    """``events`` (every copy of every id in segments ``F..N``) as ``Copies``, marked as
    ``split_copies`` marks them among all the events of segments ``1..N``, given ``earlier``: the
    first copy of every id in segments ``1..F-1`` (at most one row per id, the event columns).

    An id ``earlier`` holds has its first copy there: every copy of it in ``events`` is a
    duplicate of that row (``payload_conflict`` against its payload). Any other id has no copy
    before ``F``: ``split_copies`` of those events alone decides as the whole log would.

    ``earlier`` grows with the log, ``events`` with the segments read: only the rows of
    ``earlier`` whose id ``events`` hold are looked at (a semi join, its build side the ids of
    ``events``), and they are what the two joins read (``Copies.earlier``, cached with the marks).
    """
    seen = earlier.join(events.select("event_id"), "event_id", "left_semi")
    held = seen.select(
        "event_id",
        F.col("segment").alias("first_segment"),
        F.col("line_number").alias("first_line_number"),
        *[F.col(name).alias(f"_first_{name}") for name in payload],
    )
    differs = functools.reduce(
        lambda left, right: left | right,
        [~F.col(name).eqNullSafe(F.col(f"_first_{name}")) for name in payload],
        F.lit(False),
    )
    repeats = events.join(held, "event_id").select(
        *events.columns,
        F.lit(True).alias("is_duplicate"),
        "first_segment",
        "first_line_number",
        differs.alias("payload_conflict"),
    )
    fresh = split_copies(events.join(held.select("event_id"), "event_id", "left_anti"), payload)
    return Copies(ids=fresh.ids, once=fresh.once, repeated=fresh.repeated.unionByName(repeats), earlier=seen)


def mark_duplicates(events: DataFrame, payload: Sequence[str] = PAYLOAD_COLUMNS) -> DataFrame:
    """``mark_duplicates_table`` over a complete set of events (the batch view; see ``split_copies``)."""
    return split_copies(events, payload).marked


def first_copies(marked: DataFrame) -> DataFrame:
    """The deduplicated events (first copies), without the marking columns."""
    return marked.where(~F.col("is_duplicate")).drop(*[field.name for field in MARK_FIELDS])


def later_copies(marked: DataFrame) -> DataFrame:
    """The duplicates, each pointing at the first copy it repeats."""
    return marked.where(F.col("is_duplicate")).drop("is_duplicate")


def line_counts(parsed: DataFrame, duplicates: DataFrame) -> dict[str, int]:
    """Where a batch's lines went: ``lines`` read (``parsed``, with ``heartbeat`` and
    ``reject_reason``), of which ``heartbeats``, ``dead_letters`` and valid events; of those the
    ``duplicates`` (the rows of ``duplicates``, the later copies the dedup marked) and the
    ``firsts`` (every other valid event: dedup keeps one copy of each, so their count is the
    number of distinct events).

    One pass over ``parsed`` (which the caller caches) and a count of the duplicates; the valid
    events are not read again. A run conserves its lines when ``lines == firsts + duplicates +
    dead_letters + heartbeats``: every line is exactly one of an event, a heartbeat and a dead
    letter."""
    lines = parsed_counts(parsed)
    repeats = duplicates.count()
    return {
        "lines": lines["lines"],
        "heartbeats": lines["heartbeats"],
        "dead_letters": lines["dead_letters"],
        "firsts": lines["events"] - repeats,
        "duplicates": repeats,
    }


def parsed_counts(parsed: DataFrame) -> dict[str, int]:
    """What parsing made of the lines (``parsed``: a parser's rows, with ``heartbeat`` and
    ``reject_reason``), in one pass: ``lines``, ``heartbeats``, ``dead_letters`` and valid
    ``events`` (every copy of an event included)."""
    return (
        parsed.agg(
            F.count(F.lit(1)).alias("lines"),
            F.count_if("heartbeat").alias("heartbeats"),
            F.count("reject_reason").alias("dead_letters"),
            F.count_if(F.col("reject_reason").isNull() & ~F.col("heartbeat")).alias("events"),
        )
        .first()
        .asDict()
    )


@dataclass(frozen=True)
class StreamDedup:
    """``deduplicate_stream``'s answer: the ``firsts`` (lines that are first copies, to be
    remembered) and the ``duplicates`` (lines with ``first_segment``, ``first_line_number`` and
    ``payload_conflict`` of the remembered copy they repeat), each in log order."""

    firsts: pa.Table
    duplicates: pa.Table


def _payloads(table: pa.Table, rows: np.ndarray, payload: Sequence[str]) -> list[tuple]:
    chosen = table.select(list(payload)).take(pa.array(rows, pa.int64())).to_pylist()
    return [tuple(row.values()) for row in chosen]


def remembered_from(times: np.ndarray, watermarks: np.ndarray) -> np.ndarray:
    """From when a first copy is remembered (microseconds): the later of its event time and the
    watermark its line was judged by (an unknown watermark, ``NO_TIME``, adds nothing)."""
    return np.maximum(times, watermarks)


def remembered_from_column(event_time: str, watermark: str):
    """``remembered_from`` as a Spark column (microseconds), for a replay that filters in Spark."""
    return F.greatest(F.unix_micros(event_time), F.col(watermark))


def deduplicate_stream(
    lines: pa.Table, remembered: pa.Table, horizon: int, payload: Sequence[str] = PAYLOAD_COLUMNS
) -> StreamDedup:
    """Mark copies among ``lines`` (events in log order with ``_w``, the int64 watermark each was
    judged by) against ``remembered`` (``REMEMBERED_SCHEMA``: first copies from before, at most
    one per id).

    A copy is a duplicate when its id's remembered copy has ``remembered_from >= _w - horizon``
    (an unknown watermark forgets nothing); otherwise it is a first copy and is remembered
    instead. ``payload``: as for ``mark_duplicates_table`` (``remembered`` holds those columns).
    """
    count, known_count = lines.num_rows, remembered.num_rows
    ids = pa.chunked_array([*remembered["event_id"].chunks, *lines["event_id"].chunks], pa.string())
    codes = pc.dictionary_encode(ids.combine_chunks()).indices.to_numpy(zero_copy_only=False).astype(np.int64)
    copies = np.bincount(codes) if len(codes) else np.zeros(0, dtype=np.int64)
    new_codes = codes[known_count:]
    is_copy = np.zeros(count, dtype=bool)
    first_segment = lines["segment"].to_numpy().copy()
    first_line = lines["line_number"].to_numpy().copy()
    conflict = np.zeros(count, dtype=bool)
    contested = np.flatnonzero(copies[new_codes] > 1)  # ids seen more than once: decide in order
    if contested.size:
        old_row = {int(code): row for row, code in enumerate(codes[:known_count])}
        old_rows = np.array(
            sorted(old_row[int(c)] for c in set(new_codes[contested].tolist()) if int(c) in old_row), dtype=np.int64
        )
        old_payload = dict(zip(old_rows.tolist(), _payloads(remembered, old_rows, payload)))
        old_time = remembered["remembered_from"].cast(pa.int64()).to_numpy(zero_copy_only=False)
        old_segment, old_line = remembered["segment"].to_numpy(), remembered["line_number"].to_numpy()
        new_payload = dict(zip(contested.tolist(), _payloads(lines, contested, payload)))
        watermarks = lines["_w"].to_numpy()
        times = remembered_from(lines["event_time"].cast(pa.int64()).to_numpy(zero_copy_only=False), watermarks)
        segments, numbers = lines["segment"].to_numpy(), lines["line_number"].to_numpy()
        held: dict[int, tuple] = {}  # code -> (event_time, segment, line_number, payload)
        for code in set(new_codes[contested].tolist()):
            row = old_row.get(code)
            if row is not None:
                held[code] = (int(old_time[row]), int(old_segment[row]), int(old_line[row]), old_payload[row])
        for row in contested.tolist():  # log order
            code = int(new_codes[row])
            first = held.get(code)
            mark = int(watermarks[row])
            if first is not None and (mark == NO_TIME or first[0] >= mark - horizon):
                is_copy[row] = True
                first_segment[row], first_line[row] = first[1], first[2]
                conflict[row] = first[3] != new_payload[row]
            else:
                held[code] = (int(times[row]), int(segments[row]), int(numbers[row]), new_payload[row])
    copy_rows = pa.array(is_copy)
    duplicates = lines.filter(copy_rows)
    for name, values in (
        ("first_segment", first_segment),
        ("first_line_number", first_line),
        ("payload_conflict", conflict),
    ):
        duplicates = duplicates.append_column(name, pa.array(values[is_copy]))
    return StreamDedup(firsts=lines.filter(pc.invert(copy_rows)), duplicates=duplicates)


def remembered_rows(firsts: pa.Table) -> pa.Table:
    """First copies (with ``_w``) as ``REMEMBERED_SCHEMA`` rows."""
    since = remembered_from(
        firsts["event_time"].cast(pa.int64()).to_numpy(zero_copy_only=False), firsts["_w"].to_numpy()
    )
    rows = firsts.select(list(EVENT_SCHEMA.names)).append_column(
        "remembered_from", pa.array(since, pa.int64()).cast(UTC_MICROS)
    )
    return rows.cast(REMEMBERED_SCHEMA)


def still_remembered(remembered: pa.Table, watermark_after: int | None, horizon: int) -> pa.Table:
    """The remembered copies a later line can still be recognised against once the watermark is
    ``watermark_after``: ``remembered_from >= watermark_after - horizon`` (all while it is unknown)."""
    if watermark_after is None:
        return remembered
    since = remembered["remembered_from"].cast(pa.int64()).to_numpy(zero_copy_only=False)
    return remembered.filter(pa.array(since >= watermark_after - horizon))

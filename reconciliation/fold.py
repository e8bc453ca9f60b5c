"""Side-output reconciliation: fold the late events back into the streaming results.

``corrected_aggregates`` is what the stream would show had it waited for every event it read:
its own window rows plus the side output. With tumbling and sliding windows each late row is an
(event, window) pair, so folding adds one event and its amount to that window (creating the
window if the stream never opened it). With session windows a late event is the interval
``[event_time, event_time + gap)``; folding merges it with every session it overlaps, exactly as
sessionizing the events together would (two intervals merge when they overlap; touching is not
enough, as in ``shared.windows``).

``window_corrections`` are the deltas a consumer that already took the streaming figures must
apply: ``update`` (add the counts and money to a window it has), ``insert`` (a window it has
never seen) and ``retract`` (a session the fold merged into a larger one: subtract it).

Reconciliation never builds the corrected table on its own: ``stream_parts`` gives the stream
and its corrected form as parts of ``compare_windows``'s one aggregation (for fixed windows a
stream row counts on both sides, and each late event adds one row to the corrected side), and
``corrected_rows`` and ``window_corrections`` read the compared windows.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from reconciliation.diff import side_rows
from shared.aggregation import AMOUNT_TOTAL_TYPE, WINDOW_KEY
from shared.windows import WindowSpec

__all__ = [
    "fold_late_events",
    "stream_parts",
    "corrected_rows",
    "corrections_due",
    "window_corrections",
    "CORRECTION_KINDS",
]

CORRECTION_KINDS = ("update", "insert", "retract")


def _rows(stream: DataFrame, late: DataFrame, spec: WindowSpec) -> DataFrame:
    served = stream.select(
        *WINDOW_KEY,
        "event_count",
        F.col("amount_total").cast(AMOUNT_TOTAL_TYPE).alias("amount_total"),
        F.lit(0).cast("long").alias("late_events"),
        F.lit(0).cast(AMOUNT_TOTAL_TYPE).alias("late_amount"),
    )
    folded = spec.late_windows(late).select(
        *WINDOW_KEY,
        F.lit(1).cast("long").alias("event_count"),
        F.col("amount").cast(AMOUNT_TOTAL_TYPE).alias("amount_total"),
        F.lit(1).cast("long").alias("late_events"),
        F.col("amount").cast(AMOUNT_TOTAL_TYPE).alias("late_amount"),
    )
    return served.unionByName(folded)


def fold_late_events(stream: DataFrame, late: DataFrame, spec: WindowSpec) -> DataFrame:
    """Stream window rows + side output -> corrected rows (``WINDOW_KEY``, ``event_count``,
    ``amount_total``, and the folded-in share: ``late_events``, ``late_amount``): each late event
    added to the windows ``spec`` says it belongs to once folded (merged sessions summed as one)."""
    merged = (
        spec.merged(_rows(stream, late, spec))
        .groupBy(*WINDOW_KEY)
        .agg(
            F.sum("event_count").alias("event_count"),
            F.sum("amount_total").cast(AMOUNT_TOTAL_TYPE).alias("amount_total"),
            F.sum("late_events").alias("late_events"),
            F.sum("late_amount").cast(AMOUNT_TOTAL_TYPE).alias("late_amount"),
        )
    )
    return merged.select(*WINDOW_KEY, "event_count", "amount_total", "late_events", "late_amount")


def stream_parts(stream: DataFrame, late: DataFrame, spec: WindowSpec, scope: Column) -> list[DataFrame]:
    """The stream's windows and the corrected ones that ``scope`` selects, as ``side_rows`` parts.

    ``stream`` and ``late``: all the stream's rows and side output. Sessions are folded first and
    selected after (a late event can merge sessions across the edge of the scope); fixed windows
    need no fold of their own: the stream's row and the late rows of a window add up to its
    corrected row in the comparison's aggregation.
    """
    return spec.pick(fixed=_fixed_parts, merging=_session_parts)(stream, late, spec, scope)


def _session_parts(stream: DataFrame, late: DataFrame, spec: WindowSpec, scope: Column) -> list[DataFrame]:
    corrected = fold_late_events(stream, late, spec).where(scope)
    return [
        side_rows(stream.where(scope), stream_count="event_count", stream_amount="amount_total"),
        side_rows(
            corrected,
            corrected_count="event_count",
            corrected_amount="amount_total",
            folded_events="late_events",
            folded_amount="late_amount",
        ),
    ]


def _fixed_parts(stream: DataFrame, late: DataFrame, spec: WindowSpec, scope: Column) -> list[DataFrame]:
    zero = F.lit(0)
    served = side_rows(
        stream.where(scope),
        stream_count="event_count",
        stream_amount="amount_total",
        corrected_count="event_count",
        corrected_amount="amount_total",
        folded_events=zero,
        folded_amount=zero,
    )
    folded = side_rows(
        spec.late_windows(late.where(scope)),
        corrected_count=F.lit(1),
        corrected_amount="amount",
        folded_events=F.lit(1),
        folded_amount="amount",
    )
    return [served, folded]


def corrected_rows(windows: DataFrame) -> DataFrame:
    """The corrected windows (``fold_late_events``'s columns) among compared windows."""
    return windows.where(F.col("_in_corrected")).select(
        *WINDOW_KEY,
        F.col("corrected_count").alias("event_count"),
        F.col("corrected_amount").alias("amount_total"),
        F.col("folded_events").alias("late_events"),
        F.col("folded_amount").alias("late_amount"),
    )


def corrections_due() -> Column:
    """Over compared windows: whether the corrected figures differ from the stream's."""
    changed_values = (F.coalesce("corrected_count", F.lit(0)) != F.coalesce("stream_count", F.lit(0))) | (
        F.coalesce("corrected_amount", F.lit(0).cast(AMOUNT_TOTAL_TYPE))
        != F.coalesce("stream_amount", F.lit(0).cast(AMOUNT_TOTAL_TYPE))
    )
    return (F.col("_in_stream") != F.col("_in_corrected")) | (
        (F.col("_in_stream") | F.col("_in_corrected")) & changed_values
    )


def window_corrections(windows: DataFrame) -> DataFrame:
    """What to apply to the streaming figures to reach the corrected ones; changed windows only.

    ``windows``: ``compare_windows`` over ``stream_parts``. Columns: ``WINDOW_KEY``, ``kind``
    (``CORRECTION_KINDS``), ``add_events``, ``add_amount``.
    """
    zero = F.lit(0).cast(AMOUNT_TOTAL_TYPE)
    kind = F.when(~F.col("_in_stream"), "insert").when(~F.col("_in_corrected"), "retract").otherwise("update")
    add_events = F.coalesce("corrected_count", F.lit(0)) - F.coalesce("stream_count", F.lit(0))
    add_amount = (F.coalesce("corrected_amount", zero) - F.coalesce("stream_amount", zero)).cast(AMOUNT_TOTAL_TYPE)
    return windows.where(corrections_due()).select(
        *WINDOW_KEY, kind.alias("kind"), add_events.alias("add_events"), add_amount.alias("add_amount")
    )

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
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from shared.aggregation import AMOUNT_TOTAL_TYPE, WINDOW_KEY
from shared.windows import WindowSpec

__all__ = ["fold_late_events", "window_corrections", "CORRECTION_KINDS"]

CORRECTION_KINDS = ("update", "insert", "retract")


def _rows(stream: DataFrame, late: DataFrame, spec: WindowSpec) -> DataFrame:
    served = stream.select(
        *WINDOW_KEY, "event_count", F.col("amount_total").cast(AMOUNT_TOTAL_TYPE).alias("amount_total"),
        F.lit(0).cast("long").alias("late_events"), F.lit(0).cast(AMOUNT_TOTAL_TYPE).alias("late_amount"),
    )
    folded = spec.late_windows(late).select(
        *WINDOW_KEY, F.lit(1).cast("long").alias("event_count"), F.col("amount").cast(AMOUNT_TOTAL_TYPE).alias("amount_total"),
        F.lit(1).cast("long").alias("late_events"), F.col("amount").cast(AMOUNT_TOTAL_TYPE).alias("late_amount"),
    )
    return served.unionByName(folded)


def fold_late_events(stream: DataFrame, late: DataFrame, spec: WindowSpec) -> DataFrame:
    """Stream window rows + side output -> corrected rows (``WINDOW_KEY``, ``event_count``,
    ``amount_total``, and the folded-in share: ``late_events``, ``late_amount``): each late event
    added to the windows ``spec`` says it belongs to once folded (merged sessions summed as one)."""
    merged = spec.merged(_rows(stream, late, spec)).groupBy(*WINDOW_KEY).agg(
        F.sum("event_count").alias("event_count"),
        F.sum("amount_total").cast(AMOUNT_TOTAL_TYPE).alias("amount_total"),
        F.sum("late_events").alias("late_events"),
        F.sum("late_amount").cast(AMOUNT_TOTAL_TYPE).alias("late_amount"),
    )
    return merged.select(*WINDOW_KEY, "event_count", "amount_total", "late_events", "late_amount")


def window_corrections(stream: DataFrame, corrected: DataFrame) -> DataFrame:
    """What to apply to the streaming figures to reach the corrected ones; changed windows only.

    Columns: ``WINDOW_KEY``, ``kind`` (``CORRECTION_KINDS``), ``add_events``, ``add_amount``.
    """
    zero = F.lit(0).cast(AMOUNT_TOTAL_TYPE)
    before = stream.select(*WINDOW_KEY, F.col("event_count").alias("_n0"), F.col("amount_total").cast(AMOUNT_TOTAL_TYPE).alias("_a0"), F.lit(True).alias("_had"))
    after = corrected.select(*WINDOW_KEY, F.col("event_count").alias("_n1"), F.col("amount_total").alias("_a1"), F.lit(True).alias("_has"))
    joined = before.join(after, list(WINDOW_KEY), "full_outer")
    kind = F.when(F.col("_had").isNull(), "insert").when(F.col("_has").isNull(), "retract").otherwise("update")
    add_events = F.coalesce("_n1", F.lit(0)) - F.coalesce("_n0", F.lit(0))
    add_amount = (F.coalesce("_a1", zero) - F.coalesce("_a0", zero)).cast(AMOUNT_TOTAL_TYPE)
    return (
        joined.select(*WINDOW_KEY, kind.alias("kind"), add_events.alias("add_events"), add_amount.alias("add_amount"))
        .where((F.col("kind") != "update") | (F.col("add_events") != 0) | (F.col("add_amount") != 0))
    )

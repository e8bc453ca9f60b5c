"""Window-by-window diff of streaming results against the batch truth.

Both sides are aggregate tables keyed by ``WINDOW_KEY`` (``window_start, window_end,
account_id, currency``) with ``event_count`` and ``amount_total``. A full outer join on the key
gives every window one row and one ``status``:

* ``match``: on both sides, counts equal and amounts equal under the ``Tolerance``;
* ``value_mismatch``: on both sides, count or amount differs;
* ``missing_in_stream``: in the truth only (the stream never produced the window);
* ``extra_in_stream``: in the stream only (a window the truth does not have).

Deltas are ``truth - stream`` with an absent side taken as zero, so a positive ``amount_delta``
is money the stream has not (yet) shown, and it is exactly what a consumer of the stream must
add to reach the truth.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from reconciliation.tolerance import Tolerance
from shared.aggregation import AMOUNT_TOTAL_TYPE, WINDOW_KEY

__all__ = ["DIFF_STATUSES", "diff_windows"]

DIFF_STATUSES = ("match", "value_mismatch", "missing_in_stream", "extra_in_stream")


def _side(frame: DataFrame, prefix: str, other: str) -> DataFrame:
    value = lambda column, kind: F.col(column).cast(kind)
    absent = lambda kind: F.lit(None).cast(kind)
    return frame.select(
        *WINDOW_KEY,
        value("event_count", "long").alias(f"{prefix}_count"),
        value("amount_total", AMOUNT_TOTAL_TYPE).alias(f"{prefix}_amount"),
        absent("long").alias(f"{other}_count"),
        absent(AMOUNT_TOTAL_TYPE).alias(f"{other}_amount"),
        F.lit(prefix == "truth").alias("_in_truth"),
        F.lit(prefix == "stream").alias("_in_stream"),
    )


def diff_windows(truth: DataFrame, stream: DataFrame, tolerance: Tolerance = Tolerance()) -> DataFrame:
    """One row per window on either side: both sides' values, deltas and ``status``.

    The outer join is an aggregation of the two sides' rows by window (one shuffle, no sort);
    each side holds at most one row per window.
    """
    joined = (
        _side(truth, "truth", "stream")
        .unionByName(_side(stream, "stream", "truth"))
        .groupBy(*WINDOW_KEY)
        .agg(
            *[F.max(c).alias(c) for c in ("truth_count", "truth_amount", "stream_count", "stream_amount")],
            F.max("_in_truth").alias("_in_truth"),
            F.max("_in_stream").alias("_in_stream"),
        )
    )
    in_truth, in_stream = F.col("_in_truth"), F.col("_in_stream")
    zero_money = F.lit(0).cast(AMOUNT_TOTAL_TYPE)
    equal = (F.col("truth_count") == F.col("stream_count")) & tolerance.amounts_match(
        F.col("stream_amount"), F.col("truth_amount")
    )
    status = (
        F.when(~in_stream, "missing_in_stream")
        .when(~in_truth, "extra_in_stream")
        .when(equal, "match")
        .otherwise("value_mismatch")
    )
    return joined.select(
        *WINDOW_KEY,
        "truth_count",
        "truth_amount",
        "stream_count",
        "stream_amount",
        (F.coalesce("truth_count", F.lit(0)) - F.coalesce("stream_count", F.lit(0))).alias("count_delta"),
        (F.coalesce("truth_amount", zero_money) - F.coalesce("stream_amount", zero_money)).cast(AMOUNT_TOTAL_TYPE).alias("amount_delta"),
        status.alias("status"),
    )

"""Window-by-window diff of streaming results against the batch truth.

Both sides are aggregate tables keyed by ``WINDOW_KEY`` (``window_start, window_end,
account_id, currency``) with ``event_count`` and ``amount_total``. Every window on either side
gets one row and one ``status``:

* ``match``: on both sides, counts equal and amounts equal under the ``Tolerance``;
* ``value_mismatch``: on both sides, count or amount differs;
* ``missing_in_stream``: in the truth only (the stream never produced the window);
* ``extra_in_stream``: in the stream only (a window the truth does not have).

Deltas are ``truth - stream`` with an absent side taken as zero, so a positive ``amount_delta``
is money the stream has not (yet) shown, and it is exactly what a consumer of the stream must
add to reach the truth.

``compare_windows`` diffs the truth against the stream *and* against the corrected stream (the
stream with its side output folded in, ``fold.py``) in one pass: one aggregation by window over
the rows of every side, so each million-row table is read and shuffled once. A side is given as
*parts*: rows whose per-window sums are its values (``side_rows``), e.g. the corrected side of
fixed windows as the stream's rows plus one row per late event.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from reconciliation.tolerance import Tolerance
from shared.aggregation import AMOUNT_TOTAL_TYPE, WINDOW_KEY

__all__ = ["DIFF_STATUSES", "DIFF_COLUMNS", "SIDE_VALUES", "side_rows", "compare_windows", "diff_windows"]

DIFF_STATUSES = ("match", "value_mismatch", "missing_in_stream", "extra_in_stream")

# What each part of a side may carry (long counts, money; ``folded_*``: the late events folded
# into the corrected side); a part leaves the others null.
SIDE_VALUES = {
    "truth_count": "long",
    "truth_amount": AMOUNT_TOTAL_TYPE,
    "stream_count": "long",
    "stream_amount": AMOUNT_TOTAL_TYPE,
    "corrected_count": "long",
    "corrected_amount": AMOUNT_TOTAL_TYPE,
    "folded_events": "long",
    "folded_amount": AMOUNT_TOTAL_TYPE,
}
_SIDES = ("truth", "stream", "corrected")

# The diff of the truth against one stream, in this order.
DIFF_COLUMNS = (
    *WINDOW_KEY,
    "truth_count",
    "truth_amount",
    "stream_count",
    "stream_amount",
    "count_delta",
    "amount_delta",
    "status",
)


def side_rows(frame: DataFrame, **values: Column | str) -> DataFrame:
    """``frame``'s windows with the ``SIDE_VALUES`` named in ``values`` (column or name of
    ``frame``), the others null, and which sides the rows are on (``_in_<side>``)."""
    unknown = set(values) - set(SIDE_VALUES)
    if unknown:
        raise ValueError(f"side_rows: unknown values {sorted(unknown)}; use {list(SIDE_VALUES)}")
    given = lambda name: (F.col(values[name]) if isinstance(values[name], str) else values[name]).cast(
        SIDE_VALUES[name]
    )
    return frame.select(
        *WINDOW_KEY,
        *[
            (given(name) if name in values else F.lit(None).cast(kind)).alias(name)
            for name, kind in SIDE_VALUES.items()
        ],
        *[F.lit(f"{side}_count" in values).alias(f"_in_{side}") for side in _SIDES],
    )


def _diff(other: str, tolerance: Tolerance) -> dict[str, Column]:
    """Deltas and status of the truth against side ``other``, null where neither has the window."""
    in_truth, in_other = F.col("_in_truth"), F.col(f"_in_{other}")
    zero_money = F.lit(0).cast(AMOUNT_TOTAL_TYPE)
    count, amount = F.col(f"{other}_count"), F.col(f"{other}_amount")
    equal = (F.col("truth_count") == count) & tolerance.amounts_match(amount, F.col("truth_amount"))
    status = (
        F.when(~in_other, "missing_in_stream")
        .when(~in_truth, "extra_in_stream")
        .when(equal, "match")
        .otherwise("value_mismatch")
    )
    compared = in_truth | in_other
    prefix = "" if other == "stream" else f"{other}_"
    return {
        f"{prefix}count_delta": F.when(compared, F.coalesce("truth_count", F.lit(0)) - F.coalesce(count, F.lit(0))),
        f"{prefix}amount_delta": F.when(
            compared, (F.coalesce("truth_amount", zero_money) - F.coalesce(amount, zero_money)).cast(AMOUNT_TOTAL_TYPE)
        ),
        f"{prefix}status": F.when(compared, status),
    }


def compare_windows(parts: list[DataFrame], tolerance: Tolerance = Tolerance()) -> DataFrame:
    """One row per window in any part: each side's summed values, ``_in_<side>`` flags, and the
    diff of the truth against the stream (``count_delta``, ``amount_delta``, ``status``) and
    against the corrected stream (the same names prefixed ``corrected_``).

    ``parts``: ``side_rows`` frames. The diff against a side is null for a window that neither
    it nor the truth has. One shuffle, no sort: an aggregation, not a join.
    """
    rows = parts[0]
    for part in parts[1:]:
        rows = rows.unionByName(part)
    summed = rows.groupBy(*WINDOW_KEY).agg(
        *[F.sum(name).alias(name) for name in SIDE_VALUES],
        *[F.max(f"_in_{side}").alias(f"_in_{side}") for side in _SIDES],
    )
    diffs = {**_diff("stream", tolerance), **_diff("corrected", tolerance)}
    return summed.select("*", *[column.alias(name) for name, column in diffs.items()])


def diff_windows(truth: DataFrame, stream: DataFrame, tolerance: Tolerance = Tolerance()) -> DataFrame:
    """One row per window on either side (``DIFF_COLUMNS``): both sides' values, deltas and ``status``."""
    parts = [
        side_rows(truth, truth_count="event_count", truth_amount="amount_total"),
        side_rows(stream, stream_count="event_count", stream_amount="amount_total"),
    ]
    return compare_windows(parts, tolerance).select(*DIFF_COLUMNS)

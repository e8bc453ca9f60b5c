"""The windows where the truth and the stream agree and nothing else touches them.

On a night that went well nearly every window agrees: the stream's row equals the truth's, no
late event folds into it, no line is disputed in it. A reconcile still accounts for each of them
(a ``match`` in both diffs, counted in the figures; a row of ``corrected_aggregates``), but none
needs the comparison's decimal arithmetic: each is known from the truth's row alone.

``split_agreeing`` finds them with checksums (``reconciliation.range_diff.checksums``: a join
of the two sides' key and row hashes, two longs a row) and leaves every other window, the
*disputed* ones, to the full comparison: those whose checksums differ, those a late event
folds into, and those the attribution explains. Fixed windows only: a late event can merge
sessions, so with session windows every window is compared.

Equal rows give equal hashes; two different rows of one window with equal hashes would be taken
for agreeing, about once in 2^64 differing windows (the range diff's failure mode, its module
says more). A key hash paired more than once (a window held twice by a side) leaves no split:
every window is compared, as without it.

The split's own jobs (the checksums' join, the disputed keys, the agreeing windows' figures) cost
a few seconds whatever the size. Comparing every window took 10.0 s against the split's 12.3 s at
12,870 windows of truth, 15.3 s against 13.5 s at 105,808 and 23.0 s against 16.5 s at 247,297
(``benchmarks/reconcile_bench.py --split-sizes``): below ``SPLIT_FROM_WINDOWS`` no split is made.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import DataType

from reconciliation.diff import SIDE_VALUES
from reconciliation.keyed_diff import key_hash
from reconciliation.range_diff import BROADCAST_HASHES, checksums
from shared.aggregation import AMOUNT_TOTAL_TYPE, WINDOW_KEY

__all__ = ["SPLIT_FROM_WINDOWS", "Agreeing", "TruthTotals", "split_agreeing", "truth_totals"]

# Below this many windows of truth, comparing every window costs less than the split's own jobs
# (the module docstring).
SPLIT_FROM_WINDOWS = 100_000

_MEASURES = ("event_count", "amount_total")


def _typed(frame: DataFrame, key_types: dict[str, DataType]) -> DataFrame:
    return frame.select(
        *[F.col(k).cast(key_types[k]).alias(k) for k in WINDOW_KEY],
        F.col("event_count").cast(SIDE_VALUES["truth_count"]).alias("event_count"),
        F.col("amount_total").cast(AMOUNT_TOTAL_TYPE).alias("amount_total"),
    )


def _key_types(frame: DataFrame) -> dict[str, DataType]:
    return {k: frame.schema[k].dataType for k in WINDOW_KEY}


def _hashed(frame: DataFrame, key_types: dict[str, DataType]) -> Column:
    """The window's key hash, its fields typed as the truth's: equal windows hash equal whatever
    frame names them."""
    return key_hash([frame[k].cast(key_types[k]) for k in WINDOW_KEY])


@dataclass(frozen=True)
class TruthTotals:
    """One currency's truth rows in the compared scope: ``windows``, their ``events`` and
    ``amount``, and ``with_money``, the windows whose amount is not zero."""

    windows: int
    events: int
    amount: Decimal
    with_money: int


def truth_totals(truth: DataFrame) -> dict[str, TruthTotals]:
    """``TruthTotals`` per currency of ``truth`` (``event_count``, ``amount_total`` rows): one job."""
    rows = (
        truth.groupBy("currency")
        .agg(
            F.count(F.lit(1)).alias("windows"),
            F.sum("event_count").alias("events"),
            F.sum("amount_total").alias("amount"),
            F.sum((F.col("amount_total") != 0).cast("long")).alias("with_money"),
        )
        .collect()
    )
    return {
        r["currency"]: TruthTotals(
            r["windows"], r["events"] or 0, Decimal(0) if r["amount"] is None else r["amount"], r["with_money"] or 0
        )
        for r in rows
    }


@dataclass(frozen=True)
class Agreeing:
    """The split: ``disputed(part)`` keeps a part's rows of the disputed windows; ``rows``: the
    agreeing windows' truth rows (``WINDOW_KEY``, ``event_count``, ``amount_total``), each equal
    to the stream's row and to the corrected one; ``disputed_windows``: how many key hashes the
    full comparison gets; ``truth_totals``: every truth row's totals per currency, disputed and
    agreeing (the agreeing windows' figures are these less the disputed truth rows')."""

    hashes: DataFrame  # ``_key_hash`` of every disputed window (broadcast when small)
    truth: DataFrame  # its key fields' types are the ones every frame's keys are hashed as
    disputed_windows: int
    truth_totals: dict[str, TruthTotals]

    def disputed(self, part: DataFrame) -> DataFrame:
        return self._with_hash(part).join(self.hashes, "_key_hash", "left_semi").drop("_key_hash")

    @property
    def rows(self) -> DataFrame:
        return self._with_hash(self.truth).join(self.hashes, "_key_hash", "left_anti").drop("_key_hash")

    def _with_hash(self, frame: DataFrame) -> DataFrame:
        return frame.withColumn("_key_hash", _hashed(frame, _key_types(self.truth)))

    def corrected_rows(self, like: DataFrame) -> DataFrame:
        """The agreeing windows as ``corrected_aggregates`` rows: the stream's, nothing folded in."""
        types = {field.name: field.dataType for field in like.schema.fields}
        values = {
            "event_count": F.col("event_count"),
            "amount_total": F.col("amount_total"),
            "late_events": F.lit(0),
            "late_amount": F.lit(0),
        }
        return self.rows.select(
            *[(F.col(c) if c in WINDOW_KEY else values[c].cast(types[c])).alias(c) for c in like.columns]
        )


def split_agreeing(
    truth: DataFrame, stream: DataFrame, touched: list[DataFrame], *, min_windows: int | None = None
) -> Agreeing | None:
    """The agreeing windows of ``truth`` and ``stream`` (both the compared scope's rows) that no
    frame of ``touched`` (rows with ``WINDOW_KEY``: the late events' windows, the explained
    ones) names; None (compare every window) when a window is held twice by a side, or when the
    truth holds fewer than ``min_windows`` windows (default ``SPLIT_FROM_WINDOWS``)."""
    totals = truth_totals(truth)  # the size of the truth and, once split, the agreeing windows' figures
    if sum(t.windows for t in totals.values()) < (SPLIT_FROM_WINDOWS if min_windows is None else min_windows):
        return None
    key_types = _key_types(truth)
    truth, stream = _typed(truth, key_types), _typed(stream, key_types)
    sums = checksums(truth, stream, WINDOW_KEY, _MEASURES)
    if not sums.paired_once:
        return None
    hashes = sums.differing_hashes()
    for frame in touched:
        hashes = hashes.unionByName(frame.select(_hashed(frame, key_types).alias("_key_hash")))
    hashes = hashes.distinct().localCheckpoint(eager=True)
    disputed = hashes.count()
    return Agreeing(
        hashes=F.broadcast(hashes) if disputed <= BROADCAST_HASHES else hashes,
        truth=truth,
        disputed_windows=disputed,
        truth_totals=totals,
    )

"""Pairs of window tables differing in a known share of windows, and four diffs of each, timed.

``build_pair`` writes a truth of ``windows`` billing windows (``WINDOW_KEY``, ``event_count``,
``amount_total`` as ``DECIMAL(38,6)``) and a stream equal to it but for a hash-chosen ``share`` of
the windows: a third with the amount one unit of the last digit higher, a third with one event
more, a third missing from the stream; the stream also holds as many windows the truth does not
(``extra_in_stream``). Both are Parquet files read back, so every diff reads the same files.

``time_pair`` times, interleaved in one Spark session (``rounds`` times each, the medians; a
single run of a 3-second join moves by a tenth or more on a shared machine): bare Spark's full outer join of the two
(a status per window, the statuses counted), the lab's ``keyed_diff`` (the full join, with the
repeated-key check, deltas and tolerance rule) and its ``status_counts``, the lab's ``range_diff``
(checksums per key hash, the full join of the differing keys only) and its counts, and
datacompy's ``SparkSQLCompare`` on the same DataFrames (the comparison and its four row counts,
no report). All four must count the same statuses, and the counts must be the ones built.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from reconciliation.keyed_diff import STATUSES, keyed_diff, status_counts
from reconciliation.range_diff import range_diff
from shared.aggregation import AMOUNT_TOTAL_TYPE, WINDOW_KEY

__all__ = ["PairTimes", "build_pair", "time_pair"]

MEASURES = ("event_count", "amount_total")
_MINUTES = 1440  # one day of 1-minute windows per account
_ONE_MILLIONTH = "0.000001"  # one unit of the amounts' last digit


@dataclass(frozen=True)
class PairTimes:
    """Seconds of each diff of one pair, and the statuses they all counted."""

    share: float
    windows: int
    statuses: dict[str, int]
    bare_join: float
    lab_full_join: float
    lab_range_diff: float
    keys_joined: int
    datacompy: float


def _truth(spark: SparkSession, windows: int) -> DataFrame:
    i = F.col("id")
    start = F.timestamp_seconds(F.lit(1_795_000_000 - 1_795_000_000 % 86_400) + (i % _MINUTES) * 60)
    return spark.range(windows).select(
        start.alias("window_start"),
        (start + F.expr("INTERVAL 1 MINUTE")).alias("window_end"),
        F.format_string("acct-%06d", (i / _MINUTES).cast("long")).alias("account_id"),
        F.element_at(F.array(*[F.lit(c) for c in ("EUR", "USD", "GBP")]), (i % 3 + 1).cast("int")).alias("currency"),
        (F.pmod(F.xxhash64(i), F.lit(40)) + 1).alias("event_count"),
        (F.pmod(F.xxhash64(i, F.lit(1)), F.lit(10**9)).cast("decimal(20,0)") / 1_000_000)
        .cast(AMOUNT_TOTAL_TYPE)
        .alias("amount_total"),
        F.pmod(F.xxhash64(i, F.lit(2)), F.lit(10**6)).alias("_draw"),
    )


def build_pair(spark: SparkSession, windows: int, share: float, out: Path) -> dict[str, int]:
    """Write ``out/truth`` and ``out/stream`` (the module docstring); the statuses built."""
    cut = int(round(share * 10**6))
    truth = _truth(spark, windows)
    kind = F.when(F.col("_draw") < cut, F.col("_draw") % 3)  # 0 amount, 1 count, 2 missing; null: equal
    stream = truth.where(kind.isNull() | (kind != 2)).select(
        *WINDOW_KEY,
        F.when(kind == 1, F.col("event_count") + 1).otherwise(F.col("event_count")).alias("event_count"),
        F.when(
            kind == 0, (F.col("amount_total") + F.lit(_ONE_MILLIONTH).cast(AMOUNT_TOTAL_TYPE)).cast(AMOUNT_TOTAL_TYPE)
        )
        .otherwise(F.col("amount_total"))
        .alias("amount_total"),
    )
    extra = truth.where(F.col("_draw") < cut).select(
        *WINDOW_KEY[:2],
        F.concat(F.lit("extra-"), "account_id").alias("account_id"),
        *WINDOW_KEY[3:],
        *MEASURES,
    )
    truth.drop("_draw").write.mode("overwrite").parquet(str(out / "truth"))
    stream.unionByName(extra).write.mode("overwrite").parquet(str(out / "stream"))
    drawn = truth.where(F.col("_draw") < cut).groupBy(F.col("_draw") % 3).count().collect()
    by_kind = {row[0]: row["count"] for row in drawn}
    differing = sum(by_kind.values())
    return {
        "match": windows - differing,
        "value_mismatch": by_kind.get(0, 0) + by_kind.get(1, 0),
        "missing_in_stream": by_kind.get(2, 0),
        "extra_in_stream": differing,
    }


def _bare_join(truth: DataFrame, stream: DataFrame) -> dict[str, int]:
    joined = truth.alias("t").join(stream.alias("s"), list(WINDOW_KEY), "full_outer")
    t, s = (lambda c: F.col(f"t.{c}")), (lambda c: F.col(f"s.{c}"))
    status = (
        F.when(s("event_count").isNull(), "missing_in_stream")
        .when(t("event_count").isNull(), "extra_in_stream")
        .when((t("event_count") == s("event_count")) & (t("amount_total") == s("amount_total")), "match")
        .otherwise("value_mismatch")
    )
    found = {r["status"]: r["count"] for r in joined.groupBy(status.alias("status")).count().collect()}
    return {name: found.get(name, 0) for name in STATUSES}


def _datacompy(spark: SparkSession, truth: DataFrame, stream: DataFrame) -> dict[str, int]:
    from datacompy import SparkSQLCompare

    compare = SparkSQLCompare(spark, truth, stream, join_columns=list(WINDOW_KEY), abs_tol=0, rel_tol=0)
    both, matching = compare.intersect_rows.count(), compare.count_matching_rows()
    return {
        "match": matching,
        "value_mismatch": both - matching,
        "missing_in_stream": compare.df1_unq_rows.count(),
        "extra_in_stream": compare.df2_unq_rows.count(),
    }


def _timed(run):
    started = time.perf_counter()
    value = run()
    return time.perf_counter() - started, value


def time_pair(spark: SparkSession, out: Path, share: float, windows: int, rounds: int = 1) -> PairTimes:
    """Build the pair under ``out`` and time the four diffs of it (``SystemExit`` if any counts
    a status otherwise than the pair was built): bare Spark's join and the lab's two diffs
    ``rounds`` times, interleaved, each the median of its rounds; datacompy's, several times
    slower than the others, once."""
    built = build_pair(spark, windows, share, out)
    read = lambda name: spark.read.parquet(str(out / name))
    keys = list(WINDOW_KEY)

    def ranged_counts():
        ranged = range_diff(read("truth"), read("stream"), keys, MEASURES)
        return ranged.keys_joined, ranged.status_counts()

    diffs = {
        "bare join": lambda: _bare_join(read("truth"), read("stream")),
        "lab full join": lambda: status_counts(keyed_diff(read("truth"), read("stream"), keys, MEASURES)),
        "lab range diff": ranged_counts,
    }
    seconds: dict[str, list[float]] = {name: [] for name in diffs}
    found = {}
    for _ in range(rounds):
        for name, run in diffs.items():
            took, found[name] = _timed(run)
            seconds[name].append(took)
    keys_joined, found["lab range diff"] = found["lab range diff"]
    datacompy_seconds, found["datacompy"] = _timed(lambda: _datacompy(spark, read("truth"), read("stream")))
    wrong = {name: counts for name, counts in found.items() if counts != built}
    if wrong:
        raise SystemExit(f"differing pairs, share {share}: built {built}, counted otherwise by {wrong}")
    median = {name: statistics.median(times) for name, times in seconds.items()}
    return PairTimes(
        share=share,
        windows=sum(built.values()),
        statuses=built,
        bare_join=median["bare join"],
        lab_full_join=median["lab full join"],
        lab_range_diff=median["lab range diff"],
        keys_joined=keys_joined,
        datacompy=datacompy_seconds,
    )

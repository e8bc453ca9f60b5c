"""A keyed diff that joins only the key ranges whose checksums differ.

Where two tables differ in few keys, most of a full outer join pairs equal rows. ``range_diff``
splits the keys into ``ranges`` buckets (``pmod(key_hash, ranges)``, ``reconciliation.keyed_diff``),
computes a checksum of each bucket on each side in one aggregation per side, and runs
``keyed_diff`` only on the rows of the buckets whose checksums differ. Every key of a bucket
whose checksums agree is a ``match``: counted, not joined. The statuses and deltas of the other
keys are ``keyed_diff``'s, tolerance and null rules included, and a key held twice by a side is
still a ``DuplicateKeys`` error (checked on every row, not only on the joined ones: the
checksums are summed per key hash first, so a hash a side holds twice is seen in the same job).

A bucket's checksum on a side is its number of rows and the exact sum of each row's
``xxhash64`` over its key and measures and which of them are null, summed as two 32-bit halves
(no overflow below 2^31 rows per bucket). Equal rows give equal checksums, so a bucket joined
needlessly costs time, never a status: decimals of different scales (``1.50`` against
``1.500``) hash apart and are compared by the join, exactly.

The failure mode is the other way: two buckets holding different rows with equal checksums,
whose differences would be counted as matches. That needs the same row count and the hashes of
the rows that differ summing to exactly the same 64-bit halves; for a hash that behaves as a
random function the chance is at most about 2^-64 per differing bucket, under 10^-13 for a
million differing buckets. ``xxhash64`` is not a cryptographic hash: rows made on purpose to
collide would pass, so a diff that must hold against such rows uses the full join,
``keyed_diff``. A row with a null key field never matches in
the join (null equals nothing), so its bucket is always joined.

``ranges`` trades the size of the bucket tables (two rows per bucket, collected by nothing)
against the rows joined: with a share ``d`` of the keys differing at random and ``n / ranges``
keys a bucket, about ``1 - (1 - d) ** (n / ranges)`` of the rows are joined.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import reduce

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from reconciliation.keyed_diff import check_unique, joined_diff, key_hash, status_counts
from reconciliation.tolerance import Tolerance

__all__ = ["DEFAULT_RANGES", "RangeDiff", "range_diff"]

DEFAULT_RANGES = 1 << 17

_LOW_HALF = 0xFFFFFFFF


@dataclass(frozen=True)
class RangeDiff:
    """What ``range_diff`` found: ``keyed_diff``'s rows for the keys of the buckets whose
    checksums differ, and how many keys the buckets with equal checksums hold (each a match)."""

    differing: DataFrame
    matched_unjoined: int
    ranges: int
    ranges_joined: int

    def status_counts(self) -> dict[str, int]:
        """How many keys have each status, over both sides' every key (every status named)."""
        counts = status_counts(self.differing)
        counts["match"] += self.matched_unjoined
        return counts


def _bucket_checksums(
    truth: DataFrame, stream: DataFrame, keys: Sequence[str], measures: Sequence[str], ranges: int
) -> DataFrame:
    """Per bucket: whether its checksums differ, the truth's rows, and a key hash a side holds
    twice (null: none). One job of two aggregations: by key hash over both sides (a few longs
    a row), then by bucket."""
    columns = [*keys, *measures]
    row_hash = F.xxhash64(*[F.col(c) for c in columns], *[F.col(c).isNull() for c in columns])
    null_key = reduce(lambda a, b: a | b, [F.col(k).isNull() for k in keys])

    def hashed(frame: DataFrame, in_truth: bool) -> DataFrame:
        return frame.select(
            key_hash(keys).alias("_key_hash"),
            row_hash.alias("_hash"),
            null_key.alias("_null_key"),
            F.lit(in_truth).alias("_in_truth"),
        )

    def on(in_truth: bool, column):
        return F.when(F.col("_in_truth") == F.lit(in_truth), column)

    high, low = F.shiftrightunsigned("_hash", 32), F.col("_hash").bitwiseAND(F.lit(_LOW_HALF))
    per_key_hash = (
        hashed(truth, True)
        .unionByName(hashed(stream, False))
        .groupBy("_key_hash")
        .agg(
            *[F.count(on(t, F.lit(1))).alias(f"{n}_rows") for t, n in ((True, "truth"), (False, "stream"))],
            *[F.sum(on(t, high)).alias(f"{n}_high") for t, n in ((True, "truth"), (False, "stream"))],
            *[F.sum(on(t, low)).alias(f"{n}_low") for t, n in ((True, "truth"), (False, "stream"))],
            F.max("_null_key").alias("_null_key"),
        )
    )
    differs = (
        (F.col("truth_rows") != F.col("stream_rows"))
        | ~F.col("truth_high").eqNullSafe(F.col("stream_high"))
        | ~F.col("truth_low").eqNullSafe(F.col("stream_low"))
        | F.col("_null_key")
    )
    repeated = (F.col("truth_rows") > 1) | (F.col("stream_rows") > 1)
    return per_key_hash.groupBy(F.pmod("_key_hash", F.lit(ranges)).alias("_range")).agg(
        F.max(differs).alias("_differs"),
        F.sum("truth_rows").alias("truth_rows"),
        F.max(F.when(repeated, F.col("_key_hash"))).alias("_repeated_hash"),
    )


def range_diff(
    truth: DataFrame,
    stream: DataFrame,
    keys: Sequence[str],
    measures: Sequence[str],
    tolerance: Tolerance | None = None,
    ranges: int = DEFAULT_RANGES,
) -> RangeDiff:
    """``keyed_diff`` of the buckets of keys whose checksums differ (the module docstring)."""
    if ranges < 1:
        raise ValueError(f"ranges must be a whole number >= 1, got {ranges}")
    # At most ``ranges`` rows, kept: the figures and the rows to join read it, not the tables again.
    compared = _bucket_checksums(truth, stream, keys, measures, ranges).localCheckpoint(eager=True)
    summary = compared.agg(
        F.sum(F.when(~F.col("_differs"), F.col("truth_rows"))).alias("matched"),
        F.count(F.when(F.col("_differs"), 1)).alias("joined"),
        F.slice(F.collect_set("_repeated_hash"), 1, 20).alias("repeated"),  # a few suffice
    ).first()
    if summary["repeated"]:
        # a key hash held twice: a repeated key (DuplicateKeys), or two keys sharing a hash
        check_unique(truth, stream, keys, candidates=summary["repeated"])
    joined_ranges = F.broadcast(compared.where(F.col("_differs")).select("_range"))

    def rows_to_join(frame: DataFrame) -> DataFrame:
        return (
            frame.withColumn("_range", F.pmod(key_hash(keys), F.lit(ranges)))
            .join(joined_ranges, "_range", "left_semi")
            .drop("_range")
        )

    return RangeDiff(
        differing=joined_diff(rows_to_join(truth), rows_to_join(stream), keys, measures, tolerance),
        matched_unjoined=int(summary["matched"] or 0),
        ranges=ranges,
        ranges_joined=int(summary["joined"] or 0),
    )

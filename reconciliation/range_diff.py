"""A keyed diff that joins only the key ranges whose checksums differ.

Where two tables differ in few keys, most of a full outer join pairs equal rows. ``range_diff``
splits the keys into ``ranges`` buckets (``pmod(key_hash, ranges)``, ``reconciliation.keyed_diff``),
computes a checksum of each bucket on each side in one aggregation per side, and runs
``keyed_diff`` only on the rows of the buckets whose checksums differ. Every key of a bucket
whose checksums agree is a ``match``: counted, not joined. The statuses and deltas of the other
keys are ``keyed_diff``'s, tolerance and null rules included, and a key held twice by a side is
still a ``DuplicateKeys`` error (checked on every row, not only on the joined ones).

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
collide would pass, so a diff that must hold against such rows uses the full join
(``keyed_diff``; ``lklab reconcile --exact-join``). A row with a null key field never matches in
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


def _bucket_checksums(frame: DataFrame, keys: Sequence[str], measures: Sequence[str], ranges: int, name: str):
    columns = [*keys, *measures]
    row_hash = F.xxhash64(*[F.col(c) for c in columns], *[F.col(c).isNull() for c in columns])
    null_key = reduce(lambda a, b: a | b, [F.col(k).isNull() for k in keys])
    return (
        frame.select(
            F.pmod(key_hash(keys), F.lit(ranges)).alias("_range"),
            row_hash.alias("_hash"),
            null_key.alias("_null_key"),
        )
        .groupBy("_range")
        .agg(
            F.count(F.lit(1)).alias(f"{name}_rows"),
            F.sum(F.shiftrightunsigned("_hash", 32)).alias(f"{name}_high"),
            F.sum(F.col("_hash").bitwiseAND(F.lit(_LOW_HALF))).alias(f"{name}_low"),
            F.max("_null_key").alias(f"{name}_null_key"),
        )
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
    check_unique(truth, stream, keys)
    buckets = _bucket_checksums(truth, keys, measures, ranges, "truth").join(
        _bucket_checksums(stream, keys, measures, ranges, "stream"), "_range", "full_outer"
    )
    equal = F.coalesce(
        (F.col("truth_rows") == F.col("stream_rows"))
        & (F.col("truth_high") == F.col("stream_high"))
        & (F.col("truth_low") == F.col("stream_low"))
        & ~F.col("truth_null_key")
        & ~F.col("stream_null_key"),
        F.lit(False),
    )
    # At most ``ranges`` rows, kept: the figures and the rows to join read it, not the tables again.
    compared = buckets.select("_range", equal.alias("_equal"), "truth_rows").localCheckpoint(eager=True)
    summary = compared.agg(
        F.sum(F.when(F.col("_equal"), F.col("truth_rows"))).alias("matched"),
        F.sum(F.when(~F.col("_equal"), 1)).alias("joined"),
    ).first()
    joined_ranges = F.broadcast(compared.where(~F.col("_equal")).select("_range"))

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

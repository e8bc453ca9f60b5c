"""A keyed diff that joins only the keys whose checksums differ.

Where two tables differ in few keys, most of a full outer join pairs equal rows. ``range_diff``
first compares checksums: a full outer join of the two sides' (key hash, row hash) pairs, two
longs a row (``key_hash``, ``reconciliation.keyed_diff``; the row hash is ``xxhash64`` over the
key and measures and which of them are null), counted by whether the two row hashes agree. A key
hash whose pair agrees is a ``match``: counted, not joined. ``keyed_diff`` runs on the rows of
the other key hashes only, so their statuses and deltas are the full join's, tolerance and null
rules included. ``rows()`` adds the matched keys' rows, built from the truth alone (no join):
every key's row, as ``keyed_diff`` gives it.

The range compared is one key hash, not a bucket of them: refusing a key held twice needs every
row's key hash to meet the others anyway, and a coarser range would join the equal keys that
share it with a differing one, and need a second pass over every key to say which.

A key held twice by a side is a ``DuplicateKeys`` error, found on every row (not only on the
joined ones) by the same job. Each side's rows are counted as the join reads them; with no key
hash held twice, the join pairs each row once, so the rows it paired equal those counts. A key
hash held twice by one side and at least once by the other pairs a row twice, and the counts
part; held twice and not by the other side, its rows differ and the differing key hash is in two
pairs. Either way the rows are then checked exactly (grouped by key), so two keys sharing a hash
are never taken for a repeat: shared across the sides, nothing is taken from the checksums and
every key is joined; on one side only, their rows differ and are joined. A row with a null key
field matches nothing in the join: its row hash includes its side, so it is always joined.

Equal rows give equal hashes, so a key joined needlessly costs time, never a status: decimals of
different scales (``1.50`` against ``1.500``) hash apart and are compared by the join, exactly.
The failure mode is the other way: two different rows of one key whose hashes are equal, a
difference counted as a match. For a hash that behaves as a random function the chance is
2^-64 per differing key, under 10^-13 for a million of them. ``xxhash64`` is not a cryptographic
hash: rows made on purpose to collide would pass, so a diff that must hold against such rows
uses the full join, ``keyed_diff``.

The differing key hashes are kept (a long each) and picked out of both sides by a broadcast
semi-join up to ``BROADCAST_HASHES`` of them, by a shuffled one beyond.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import reduce

from pyspark.sql import Column, DataFrame, Observation
from pyspark.sql import functions as F

from reconciliation.keyed_diff import joined_diff, key_hash, refuse_repeated_hashes, status_counts
from reconciliation.tolerance import Tolerance

__all__ = ["BROADCAST_HASHES", "Checksums", "RangeDiff", "checksums", "range_diff"]

BROADCAST_HASHES = 1 << 21  # 16 MiB of longs

# Repeated hashes checked exactly; two distinct keys share a 64-bit hash about once in 2^64 / n^2
# pairs, so a repeat among the first few is a repeated key.
_HASH_REPEATS_CHECKED = 20

_KeyHash = Callable[[Sequence[str]], Column]


@dataclass(frozen=True)
class RangeDiff:
    """What ``range_diff`` found: ``keyed_diff``'s rows for the keys whose checksums differ
    (``differing``, ``keys_joined`` key hashes: every one where two keys of the two sides share
    a hash), the other keys' rows (``matched``: each a match,
    from the truth alone) and how many they are (``matched_unjoined``)."""

    differing: DataFrame
    matched: DataFrame
    matched_unjoined: int
    keys_joined: int

    def status_counts(self) -> dict[str, int]:
        """How many keys have each status, over both sides' every key (every status named)."""
        counts = status_counts(self.differing)
        counts["match"] += self.matched_unjoined
        return counts

    def rows(self) -> DataFrame:
        """Every key's row, as ``keyed_diff`` gives it."""
        return self.differing.unionByName(self.matched)


def _differing_hashes(
    truth: DataFrame, stream: DataFrame, keys: Sequence[str], measures: Sequence[str], hash_keys: _KeyHash
) -> tuple[DataFrame, Observation, Observation]:
    """One row per key hash with a row whose checksums differ (``_differing_hash``; ``pairs``:
    its rows in the join of row hashes) and one (null) for the pairs that agree; and what each
    side's rows are counted by (``rows``), observed in the same job. One job: a full outer join
    of the two sides' (key hash, row hash), then an aggregation by what it found."""
    columns = [*keys, *measures]
    null_key = reduce(lambda a, b: a | b, [F.col(k).isNull() for k in keys])

    def hashed(frame: DataFrame, name: str, in_truth: bool) -> tuple[DataFrame, Observation]:
        # A row with a null key field hashes with its side, so the two sides' never agree.
        row_hash = F.xxhash64(
            *[F.col(c) for c in columns], *[F.col(c).isNull() for c in columns], F.when(null_key, F.lit(in_truth))
        )
        counted = Observation()
        rows = frame.select(hash_keys(keys).alias("_key_hash"), row_hash.alias(name))
        return rows.observe(counted, F.count(F.lit(1)).alias("rows")), counted

    truth_rows, truth_counted = hashed(truth, "_truth_row", True)
    stream_rows, stream_counted = hashed(stream, "_stream_row", False)
    # A join of two longs a row: its sort is a radix sort of the key hashes, cheaper than a
    # hash table of every key hash (each held once a side, so nothing to aggregate map-side).
    pairs = truth_rows.join(stream_rows, "_key_hash", "full_outer")
    agree = F.coalesce(F.col("_truth_row") == F.col("_stream_row"), F.lit(False))
    found = pairs.groupBy(F.when(~agree, F.col("_key_hash")).alias("_differing_hash")).agg(
        F.count(F.lit(1)).alias("pairs"),
        F.count("_truth_row").alias("truth_paired"),
        F.count("_stream_row").alias("stream_paired"),
    )
    return found, truth_counted, stream_counted


def _rows_counted(counted: Observation, side: DataFrame) -> int:
    """The rows of ``side`` that ``counted`` saw; counted again where Spark planned the side away
    (an empty relation: the job reported no metrics for it, and reading them fails)."""
    try:
        return counted.get["rows"]
    except Exception:  # the JVM's error, whatever its wrapper: a count of the side is exact anyway
        return side.count()


@dataclass(frozen=True)
class Checksums:
    """What the join of the two sides' (key hash, row hash) pairs found (``checksums``).

    ``matched``: the pairs whose row hashes agree; ``joined``: the key hashes in a pair that
    does not; ``repeated``: some of those in more than one pair (a side holds the key hash
    twice); ``paired_once``: every row of each side was in exactly one pair. Without it a key
    hash is held twice by one side and at least once by the other, and no pair's agreement says
    its key matches."""

    found: DataFrame  # one row per differing key hash, one (null) for the agreeing pairs; kept
    matched: int
    joined: int
    repeated: list[int]
    paired_once: bool

    def differing_hashes(self) -> DataFrame:
        """``_key_hash``: each differing key hash once; broadcast up to ``BROADCAST_HASHES``."""
        hashes = self.found.where(F.col("_differing_hash").isNotNull()).select(
            F.col("_differing_hash").alias("_key_hash")
        )
        return F.broadcast(hashes) if self.joined <= BROADCAST_HASHES else hashes


def checksums(
    truth: DataFrame, stream: DataFrame, keys: Sequence[str], measures: Sequence[str], hash_keys: _KeyHash = key_hash
) -> Checksums:
    """The two sides' row checksums compared per key hash: one job, its result kept."""
    found, truth_counted, stream_counted = _differing_hashes(truth, stream, keys, measures, hash_keys)
    found = found.localCheckpoint(eager=True)
    summary = found.agg(
        F.sum(F.when(F.col("_differing_hash").isNull(), F.col("pairs"))).alias("matched"),
        F.count("_differing_hash").alias("joined"),
        F.sum("truth_paired").alias("truth_paired"),
        F.sum("stream_paired").alias("stream_paired"),
        F.slice(F.collect_set(F.when(F.col("pairs") > 1, F.col("_differing_hash"))), 1, _HASH_REPEATS_CHECKED).alias(
            "repeated"
        ),
    ).first()
    paired_once = (summary["truth_paired"] or 0) == _rows_counted(truth_counted, truth) and (
        summary["stream_paired"] or 0
    ) == _rows_counted(stream_counted, stream)
    return Checksums(
        found=found,
        matched=int(summary["matched"] or 0),
        joined=int(summary["joined"] or 0),
        repeated=list(summary["repeated"] or []),
        paired_once=paired_once,
    )


def range_diff(
    truth: DataFrame,
    stream: DataFrame,
    keys: Sequence[str],
    measures: Sequence[str],
    tolerance: Tolerance | None = None,
    *,
    hash_keys: _KeyHash = key_hash,
) -> RangeDiff:
    """``keyed_diff`` of the keys whose checksums differ (the module docstring). ``hash_keys``:
    the key hash of ``keys`` as a long column (``keyed_diff.key_hash``; another only to make keys
    share hashes on purpose)."""
    # One row per differing key hash, kept: the figures and the rows to join read it, not the tables again.
    sums = checksums(truth, stream, keys, measures, hash_keys)
    # A differing key hash in two pairs: a side holds it twice, with the other side not at all
    # (a repeated key, DuplicateKeys), or two keys share it (joined, so compared exactly).
    refuse_repeated_hashes(truth, stream, keys, sums.repeated)
    if not sums.paired_once:
        # A row paired twice: its key hash is held twice by one side and at least once by the
        # other, in pairs that may agree. A repeated key (DuplicateKeys) or, about never, two keys
        # sharing a hash across the sides: then no pair's agreement says a key matches.
        refuse_repeated_hashes(truth, stream, keys, None)
        every = joined_diff(truth, stream, keys, measures, tolerance)
        return RangeDiff(
            differing=every,
            matched=every.limit(0),
            matched_unjoined=0,
            keys_joined=truth.select(hash_keys(keys)).union(stream.select(hash_keys(keys))).distinct().count(),
        )
    differing_hashes = sums.differing_hashes()

    def rows(frame: DataFrame, how: str) -> DataFrame:
        return frame.withColumn("_key_hash", hash_keys(keys)).join(differing_hashes, "_key_hash", how).drop("_key_hash")

    differing = joined_diff(rows(truth, "left_semi"), rows(stream, "left_semi"), keys, measures, tolerance)
    as_stream = {m: stream.schema[m].dataType for m in measures}
    matched = (
        rows(truth, "left_anti")
        .select(
            *keys,
            *[F.col(m).alias(f"truth_{m}") for m in measures],
            *[F.col(m).cast(as_stream[m]).alias(f"stream_{m}") for m in measures],
        )
        .select(
            "*",
            *[(F.col(f"stream_{m}") - F.col(f"truth_{m}")).alias(f"delta_{m}") for m in measures],
            F.lit("match").alias("status"),
        )
    )
    return RangeDiff(
        differing=differing,
        matched=matched.select(*differing.columns),
        matched_unjoined=sums.matched,
        keys_joined=sums.joined,
    )

"""A keyed diff that joins only the keys whose checksums differ.

Where two tables differ in few keys, most of a full outer join pairs equal rows. ``range_diff``
first compares checksums: one aggregation over both sides by key hash (``key_hash``,
``reconciliation.keyed_diff``), a few longs a row, gives each key hash its rows on each side
and the ``bit_xor`` of their row hashes (``xxhash64`` over the key and measures and which of
them are null). A key hash held once on each side whose two row hashes cancel is a ``match``:
counted, not joined. ``keyed_diff`` runs on the rows of the other key hashes only, so their
statuses and deltas are the full join's, tolerance and null rules included. ``rows()`` adds the
matched keys' rows, built from the truth alone (no join): every key's row, as ``keyed_diff``
gives it.

The range compared is one key hash, not a bucket of them: refusing a key held twice needs the
aggregation by key hash on every row anyway, and a coarser range would join the equal keys that
share it with a differing one, and need a second aggregation over every key to say which.

A key held twice by a side is a ``DuplicateKeys`` error, found by that aggregation on every row
(not only on the joined ones; a side's rows are counted below 2^31 a key hash) and checked exactly
on the rows of the hash it repeats, so two keys sharing a hash are never taken for a repeat. A
row with a null key field matches nothing in the join: its row hash includes its side, so it is
always joined.

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

from collections.abc import Sequence
from dataclasses import dataclass
from functools import reduce

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from reconciliation.keyed_diff import joined_diff, key_hash, refuse_repeated_hashes, status_counts
from reconciliation.tolerance import Tolerance

__all__ = ["BROADCAST_HASHES", "RangeDiff", "range_diff"]

BROADCAST_HASHES = 1 << 21  # 16 MiB of longs

_LOW_HALF = 0xFFFFFFFF

# Repeated hashes checked exactly; two distinct keys share a 64-bit hash about once in 2^64 / n^2
# pairs, so a repeat among the first few is a repeated key.
_HASH_REPEATS_CHECKED = 20


@dataclass(frozen=True)
class RangeDiff:
    """What ``range_diff`` found: ``keyed_diff``'s rows for the keys whose checksums differ
    (``differing``, ``keys_joined`` key hashes), the other keys' rows (``matched``: each a match,
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


def _differing_hashes(truth: DataFrame, stream: DataFrame, keys: Sequence[str], measures: Sequence[str]) -> DataFrame:
    """One row per key hash whose checksums differ (``_differing_hash``) and one (null) for the
    keys that agree; ``keys``: how many, ``_repeated_hash``: a key hash a side holds twice (null:
    none). One job: an aggregation by key hash, then by what it found."""
    columns = [*keys, *measures]
    null_key = reduce(lambda a, b: a | b, [F.col(k).isNull() for k in keys])

    def hashed(frame: DataFrame, in_truth: bool) -> DataFrame:
        # A row with a null key field hashes with its side, so the two sides' never cancel.
        row_hash = F.xxhash64(
            *[F.col(c) for c in columns], *[F.col(c).isNull() for c in columns], F.when(null_key, F.lit(in_truth))
        )
        # the rows of each side counted in one sum: the truth's in the low 32 bits, the stream's above
        return frame.select(
            key_hash(keys).alias("_key_hash"),
            row_hash.alias("_row_hash"),
            F.lit(1 if in_truth else 1 << 32).cast("long").alias("_side_rows"),
        )

    per_key = (
        hashed(truth, True)
        .unionByName(hashed(stream, False))
        .groupBy("_key_hash")
        .agg(F.sum("_side_rows").alias("_side_rows"), F.bit_xor("_row_hash").alias("_xor"))
        .select(
            "_key_hash",
            "_xor",
            F.col("_side_rows").bitwiseAND(F.lit(_LOW_HALF)).alias("truth_rows"),
            F.shiftrightunsigned("_side_rows", 32).alias("stream_rows"),
        )
    )
    agree = (F.col("truth_rows") == 1) & (F.col("stream_rows") == 1) & (F.col("_xor") == 0)
    repeated = (F.col("truth_rows") > 1) | (F.col("stream_rows") > 1)
    return per_key.groupBy(F.when(~agree, F.col("_key_hash")).alias("_differing_hash")).agg(
        F.count(F.lit(1)).alias("keys"),
        F.max(F.when(repeated, F.col("_key_hash"))).alias("_repeated_hash"),
    )


def range_diff(
    truth: DataFrame,
    stream: DataFrame,
    keys: Sequence[str],
    measures: Sequence[str],
    tolerance: Tolerance | None = None,
) -> RangeDiff:
    """``keyed_diff`` of the keys whose checksums differ (the module docstring)."""
    # One row per differing key hash, kept: the figures and the rows to join read it, not the tables again.
    found = _differing_hashes(truth, stream, keys, measures).localCheckpoint(eager=True)
    summary = found.agg(
        F.sum(F.when(F.col("_differing_hash").isNull(), F.col("keys"))).alias("matched"),
        F.count("_differing_hash").alias("joined"),
        F.slice(F.collect_set("_repeated_hash"), 1, _HASH_REPEATS_CHECKED).alias("repeated"),
    ).first()
    # a key hash held twice: a repeated key (DuplicateKeys), or two keys sharing a hash
    refuse_repeated_hashes(truth, stream, keys, summary["repeated"])
    keys_joined = int(summary["joined"] or 0)
    differing_hashes = found.where(F.col("_differing_hash").isNotNull()).select(
        F.col("_differing_hash").alias("_key_hash")
    )
    if keys_joined <= BROADCAST_HASHES:
        differing_hashes = F.broadcast(differing_hashes)

    def rows(frame: DataFrame, how: str) -> DataFrame:
        return frame.withColumn("_key_hash", key_hash(keys)).join(differing_hashes, "_key_hash", how).drop("_key_hash")

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
        matched_unjoined=int(summary["matched"] or 0),
        keys_joined=keys_joined,
    )

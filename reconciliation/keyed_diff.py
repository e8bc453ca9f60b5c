"""A diff of two keyed tables: every key's status and the deltas of its measures, in Spark.

The truth and the stream each hold one row per key (``keys``: the columns that name a row) with
``measures`` (numbers). A full outer join on the keys gives each key one status::

    match              both sides hold the key and every measure is equal
    value_mismatch     both hold it and some measure differs (delta = stream - truth)
    missing_in_stream  only the truth holds it
    extra_in_stream    only the stream holds it

Measures compare exactly (decimals as decimals) and null-safely: a null equals only a null. With
a ``Tolerance`` two non-null values also count as equal when ``|stream - truth| <= abs_tol +
rel_tol * |truth|`` (``reconciliation.tolerance``); a key is a match when every measure is. A
key held twice by one side is a ``DuplicateKeys`` error naming it, never summed. Nothing is
collected but the counts.

The check for repeated keys is one job over both sides that shuffles a 64-bit hash of each key
(``key_hash``), not the keys: a hash seen twice on a side is then checked exactly on the rows
that carry it, so a collision of two keys' hashes is never taken for a repeat.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import reduce

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from reconciliation.tolerance import Tolerance

__all__ = ["STATUSES", "DuplicateKeys", "check_unique", "joined_diff", "key_hash", "keyed_diff", "status_counts"]

STATUSES = ("match", "value_mismatch", "missing_in_stream", "extra_in_stream")


class DuplicateKeys(ValueError):
    """A side holds a key more than once."""


def key_hash(keys: Sequence[str]) -> Column:
    """A 64-bit hash of a row's key (``xxhash64`` of the key columns and of which are null, so
    ``(1, null)`` and ``(null, 1)`` hash apart)."""
    return F.xxhash64(*[F.col(k) for k in keys], *[F.col(k).isNull() for k in keys])


def check_unique(
    truth: DataFrame, stream: DataFrame, keys: Sequence[str], candidates: Sequence[int] | None = None
) -> None:
    """Raise ``DuplicateKeys`` naming a key that one side holds more than once (one job for both
    sides on the keys' hashes, then an exact check of the few rows whose hash repeats);
    ``candidates``: the key hashes known to repeat (only they are checked, exactly)."""
    if candidates is not None:
        for name, side in (("truth", truth), ("stream", stream)):
            _check_rows(side, keys, name, list(candidates)[:_HASH_REPEATS_CHECKED])
        return
    hashes = (
        truth.select(key_hash(keys).alias("_key_hash"), F.lit("truth").alias("_side"))
        .unionByName(stream.select(key_hash(keys).alias("_key_hash"), F.lit("stream").alias("_side")))
        .groupBy("_side", "_key_hash")
        .count()
        .where("count > 1")
        .orderBy(F.col("_side").desc())  # the truth's first, as it is named first
        .limit(_HASH_REPEATS_CHECKED)
        .collect()
    )
    for name, side in (("truth", truth), ("stream", stream)):
        _check_rows(side, keys, name, [row["_key_hash"] for row in hashes if row["_side"] == name])


def _check_rows(side: DataFrame, keys: Sequence[str], name: str, hashes: list[int]) -> None:
    """``DuplicateKeys`` for a key of ``side`` held twice among the rows whose key hashes to one of ``hashes``."""
    if hashes:
        repeated = side.where(key_hash(keys).isin(hashes)).groupBy(*keys).count().where("count > 1").limit(1).collect()
        if repeated:
            key = {k: repeated[0][k] for k in keys}
            raise DuplicateKeys(f"the {name} holds key {key} {repeated[0]['count']} times; a key names one row")


# Repeated hashes checked exactly; two distinct keys share a 64-bit hash about once in 2^64 / n^2
# pairs, so a repeat among the first few is a repeated key.
_HASH_REPEATS_CHECKED = 20


def _equal(truth: Column, stream: Column, tolerance: Tolerance | None) -> Column:
    """Null-safe equality, widened by ``tolerance`` for two non-null values."""
    if tolerance is None or tolerance.exact:
        return truth.eqNullSafe(stream)
    return truth.eqNullSafe(stream) | F.coalesce(tolerance.amounts_match(stream, truth), F.lit(False))


def keyed_diff(
    truth: DataFrame,
    stream: DataFrame,
    keys: Sequence[str],
    measures: Sequence[str],
    tolerance: Tolerance | None = None,
) -> DataFrame:
    """One row per key of either side: the keys, ``truth_<m>``, ``stream_<m>``, ``delta_<m>``
    for each measure, and ``status`` (the module docstring; None: exact)."""
    check_unique(truth, stream, keys)
    return joined_diff(truth, stream, keys, measures, tolerance)


def joined_diff(
    truth: DataFrame,
    stream: DataFrame,
    keys: Sequence[str],
    measures: Sequence[str],
    tolerance: Tolerance | None = None,
) -> DataFrame:
    """``keyed_diff`` of two sides already known to hold each key once: the full outer join."""

    def side(frame: DataFrame, name: str) -> DataFrame:
        columns = [F.col(m).alias(f"{name}_{m}") for m in measures]
        return frame.select(*keys, *columns, F.lit(True).alias(f"_{name}"))

    joined = side(truth, "truth").join(side(stream, "stream"), list(keys), "full_outer")
    equal: Column = reduce(
        lambda a, b: a & b,
        [_equal(F.col(f"truth_{m}"), F.col(f"stream_{m}"), tolerance) for m in measures],
        F.lit(True),
    )
    status = (
        F.when(F.col("_truth").isNull(), "extra_in_stream")
        .when(F.col("_stream").isNull(), "missing_in_stream")
        .when(equal, "match")
        .otherwise("value_mismatch")
    )
    deltas = [(F.col(f"stream_{m}") - F.col(f"truth_{m}")).alias(f"delta_{m}") for m in measures]
    values = [F.col(f"{name}_{m}") for m in measures for name in ("truth", "stream")]
    return joined.select(*keys, *values, *deltas, status.alias("status"))


def status_counts(diff: DataFrame) -> dict[str, int]:
    """How many keys have each status (every status named, zeros included)."""
    found = {row["status"]: row["count"] for row in diff.groupBy("status").count().collect()}
    return {status: found.get(status, 0) for status in STATUSES}

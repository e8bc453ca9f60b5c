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
row with a null key field matches nothing, as in any join.

A key held twice by one side is a ``DuplicateKeys`` error naming it, never summed. The join
finds it: each side is counted per key between the shuffle and the sort the join does anyway
(a window over the same partitions and order, no other pass over the tables), and the status of
a repeated key is an error. So the diff is lazy and the error comes with the first action that
reads the statuses: ``status_counts`` raises ``DuplicateKeys``; any other first action does so
under ``refusing_repeated_keys()``. Nothing is collected but the counts.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from functools import reduce

from pyspark.errors import PySparkException
from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from reconciliation.tolerance import Tolerance

__all__ = [
    "STATUSES",
    "DuplicateKeys",
    "joined_diff",
    "key_hash",
    "keyed_diff",
    "refuse_repeated_hashes",
    "refusing_repeated_keys",
    "status_counts",
]

STATUSES = ("match", "value_mismatch", "missing_in_stream", "extra_in_stream")


class DuplicateKeys(ValueError):
    """A side holds a key more than once."""


def key_hash(keys: Sequence[str | Column]) -> Column:
    """A 64-bit hash of a row's key (``xxhash64`` of the key columns, named or given, and of
    which are null, so ``(1, null)`` and ``(null, 1)`` hash apart)."""
    columns = [F.col(k) if isinstance(k, str) else k for k in keys]
    return F.xxhash64(*columns, *[c.isNull() for c in columns])


def _message(side: str, key: object, times: object) -> str:
    return f"the {side} holds key {key} {times} times; a key names one row"


# What the job of a diff fails with for a repeated key: the side, the key as JSON, the count.
_REPEATED = re.compile(r"the (truth|stream) holds key (\{.*?\}) (\d+) times; a key names one row")


@contextmanager
def refusing_repeated_keys() -> Iterator[None]:
    """Around an action on a ``keyed_diff``: a key held twice raises ``DuplicateKeys`` naming it
    (its fields as the JSON values Spark writes: a timestamp as ISO text)."""
    try:
        yield
    except PySparkException as err:
        found = _REPEATED.search(str(err))
        if found is None:
            raise
        raise DuplicateKeys(_message(found[1], json.loads(found[2]), found[3])) from None


def refuse_repeated_hashes(
    truth: DataFrame, stream: DataFrame, keys: Sequence[str], hashes: Sequence[int] | None
) -> None:
    """``DuplicateKeys`` for a key that a side holds twice among the rows whose ``key_hash`` is
    one of ``hashes`` (None: among every row; the truth's first; none: two keys that share a hash)."""
    if hashes is not None and not hashes:
        return
    for name, side in (("truth", truth), ("stream", stream)):
        among = side if hashes is None else side.where(key_hash(keys).isin(list(hashes)))
        repeated = among.groupBy(*keys).count().where("count > 1").limit(1).collect()
        if repeated:
            raise DuplicateKeys(_message(name, {k: repeated[0][k] for k in keys}, repeated[0]["count"]))


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
    for each measure, and ``status`` (the module docstring; None: exact). Lazy: a repeated key
    fails the first action that reads the statuses (``refusing_repeated_keys``)."""
    return joined_diff(truth, stream, keys, measures, tolerance)


def joined_diff(
    truth: DataFrame,
    stream: DataFrame,
    keys: Sequence[str],
    measures: Sequence[str],
    tolerance: Tolerance | None = None,
) -> DataFrame:
    """``keyed_diff``'s rows: the full outer join, a repeated key's status an error."""
    per_key = Window.partitionBy(*keys)  # the join's own partitioning and order: no other shuffle

    def side(frame: DataFrame, name: str) -> DataFrame:
        columns = [F.col(m).alias(f"{name}_{m}") for m in measures]
        return frame.select(*keys, *columns, F.count(F.lit(1)).over(per_key).alias(f"_{name}_rows"))

    joined = side(truth, "truth").join(side(stream, "stream"), list(keys), "full_outer")
    equal: Column = reduce(
        lambda a, b: a & b,
        [_equal(F.col(f"truth_{m}"), F.col(f"stream_{m}"), tolerance) for m in measures],
        F.lit(True),
    )
    key = F.to_json(F.struct(*keys), {"ignoreNullFields": "false"})
    repeated = lambda name: F.raise_error(
        F.concat(
            F.lit(f"the {name} holds key "),
            key,
            F.lit(" "),
            F.col(f"_{name}_rows").cast("string"),
            F.lit(" times; a key names one row"),
        )
    )
    status = (
        F.when(F.col("_truth_rows") > 1, repeated("truth"))
        .when(F.col("_stream_rows") > 1, repeated("stream"))
        .when(F.col("_truth_rows").isNull(), "extra_in_stream")
        .when(F.col("_stream_rows").isNull(), "missing_in_stream")
        .when(equal, "match")
        .otherwise("value_mismatch")
    )
    deltas = [(F.col(f"stream_{m}") - F.col(f"truth_{m}")).alias(f"delta_{m}") for m in measures]
    values = [F.col(f"{name}_{m}") for m in measures for name in ("truth", "stream")]
    return joined.select(*keys, *values, *deltas, status.alias("status"))


def status_counts(diff: DataFrame) -> dict[str, int]:
    """How many keys have each status (every status named, zeros included); ``DuplicateKeys``
    for a key a side holds twice."""
    with refusing_repeated_keys():
        found = {row["status"]: row["count"] for row in diff.groupBy("status").count().collect()}
    return {status: found.get(status, 0) for status in STATUSES}

"""Running the lab's rules, written once as Arrow table functions, over Spark DataFrames.

Dedup, window assignment and aggregation are each one function from a ``pyarrow.Table`` to a
``pyarrow.Table`` (``shared.dedup``, ``shared.windows``, ``shared.aggregation``). The speed layer
calls them on a micro-batch held in memory; the batch path and reconciliation call them here,
through Spark, over the whole log:

* ``per_partition``: the function sees each Arrow batch of each partition on its own (rules that
  look at one row at a time, e.g. tumbling windows);
* ``per_key``: rows are hash-partitioned on ``keys`` into as many partitions as Spark has
  shuffle partitions, and the function sees every row of a partition at once, so all rows
  sharing a key value are together (dedup by ``event_id``; sessions and totals by account and
  currency). No sort: a partition is one call.

The functions run in Spark's Python workers, so they must be importable there and pure.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql.types import StructField, StructType

__all__ = ["TableFunction", "per_partition", "per_key", "with_fields"]

TableFunction = Callable[[pa.Table], pa.Table]


def with_fields(schema: StructType, *fields: StructField) -> StructType:
    """``schema`` plus ``fields`` (a new object: ``StructType.add`` changes the one it is given)."""
    return StructType([*schema.fields, *fields])


def per_partition(frame: DataFrame, function: TableFunction, schema: StructType) -> DataFrame:
    """Apply ``function`` to every Arrow batch of ``frame``; ``schema`` is its output's."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            yield from function(pa.Table.from_batches([batch])).to_batches()

    return frame.mapInArrow(run, schema)


def per_key(frame: DataFrame, keys: Sequence[str], function: TableFunction, schema: StructType) -> DataFrame:
    """Apply ``function`` to all rows of each partition after hash-partitioning on ``keys``."""
    buckets = int(frame.sparkSession.conf.get("spark.sql.shuffle.partitions"))

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        received = list(batches)
        if received:
            yield from function(pa.Table.from_batches(received)).to_batches()

    return frame.repartition(buckets, *keys).mapInArrow(run, schema)

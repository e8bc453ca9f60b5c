"""Deduplication by ``event_id``.

Producers retry: a resent event carries the same ``event_id`` (and, when the producer is
well-behaved, the same payload). The first copy in log order ``(segment, line_number)`` is the
event; every later copy is a duplicate. A later copy whose payload differs is still a
duplicate, but is flagged ``payload_conflict`` so that nobody mistakes a collision of ids for a
harmless retry. ``ingest_time`` is not payload: a retry lands later by nature.

The rule is written once, in Arrow (``mark_duplicates_table``). The speed layer applies it to
the first copies it remembers plus a micro-batch; ``mark_duplicates`` runs it over a Spark
DataFrame, every copy of an id in one call.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import BooleanType, LongType, StructField

from shared.spark_arrow import per_key, with_fields

__all__ = ["PAYLOAD_COLUMNS", "MARK_FIELDS", "mark_duplicates_table", "mark_duplicates", "first_copies", "later_copies"]

PAYLOAD_COLUMNS = ("account_id", "event_type", "amount", "currency", "event_time")
MARK_FIELDS = (
    StructField("is_duplicate", BooleanType()),
    StructField("first_segment", LongType()),
    StructField("first_line_number", LongType()),
    StructField("payload_conflict", BooleanType()),
)


def mark_duplicates_table(events: pa.Table) -> pa.Table:
    """``events`` in log order with ``is_duplicate``, ``first_segment``, ``first_line_number``
    (the first copy of the row's id; its own position for a first copy) and ``payload_conflict``.

    Works on every copy of an id at once: the rows given are the whole history that counts.
    Payload columns of valid events are never null.
    """
    ordered = events.take(pc.sort_indices(events, sort_keys=[("segment", "ascending"), ("line_number", "ascending")]))
    ids = pc.dictionary_encode(ordered["event_id"].combine_chunks()).indices.to_numpy(zero_copy_only=False)
    _, first_row_of_id = np.unique(ids, return_index=True)  # codes follow first appearance
    first = pa.array(first_row_of_id[ids] if len(ids) else np.zeros(0, dtype=np.int64))
    is_duplicate = pa.array(first.to_numpy() != np.arange(len(ids)))
    differs = pa.array(np.zeros(len(ids), dtype=bool))
    for name in PAYLOAD_COLUMNS:
        differs = pc.or_(differs, pc.not_equal(ordered[name].take(first), ordered[name]))
    marks = {
        "is_duplicate": is_duplicate,
        "first_segment": ordered["segment"].take(first),
        "first_line_number": ordered["line_number"].take(first),
        "payload_conflict": pc.and_(is_duplicate, differs),
    }
    for name, column in marks.items():
        ordered = ordered.append_column(name, column)
    return ordered


def mark_duplicates(events: DataFrame) -> DataFrame:
    """``mark_duplicates_table`` over a complete set of events (the batch view)."""
    return per_key(events, ["event_id"], mark_duplicates_table, with_fields(events.schema, *MARK_FIELDS))


def first_copies(marked: DataFrame) -> DataFrame:
    """The deduplicated events (first copies), without the marking columns."""
    return marked.where(~F.col("is_duplicate")).drop(*[field.name for field in MARK_FIELDS])


def later_copies(marked: DataFrame) -> DataFrame:
    """The duplicates, each pointing at the first copy it repeats."""
    return marked.where(F.col("is_duplicate")).drop("is_duplicate")

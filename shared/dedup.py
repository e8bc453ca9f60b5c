"""Deduplication by ``event_id``.

Producers retry: a resent event carries the same ``event_id`` (and, when the producer is
well-behaved, the same payload). The first copy in log order ``(segment, line_number)`` is the
event; every later copy is a duplicate. A later copy whose payload differs is still a
duplicate, but is flagged ``payload_conflict`` so that nobody mistakes a collision of ids for a
harmless retry. ``ingest_time`` is not payload: a retry lands later by nature.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from shared.expressions import built_once

__all__ = ["PAYLOAD_COLUMNS", "mark_duplicates", "first_copies", "later_copies"]

PAYLOAD_COLUMNS = ("account_id", "event_type", "amount", "currency", "event_time")


def _payload() -> Column:
    return F.struct(*[F.col(name) for name in PAYLOAD_COLUMNS])


@built_once
def _marking_columns() -> tuple[Column, list[Column]]:
    """The first copy of each row's id, then the marking columns derived from it."""
    by_id = Window.partitionBy("event_id").orderBy("segment", "line_number")
    first = F.first(F.struct("segment", "line_number", _payload().alias("payload"))).over(
        by_id.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    )
    is_duplicate = (F.col("_first.segment") != F.col("segment")) | (
        F.col("_first.line_number") != F.col("line_number")
    )
    return first.alias("_first"), [
        is_duplicate.alias("is_duplicate"),
        F.col("_first.segment").alias("first_segment"),
        F.col("_first.line_number").alias("first_line_number"),
        (is_duplicate & (F.col("_first.payload") != _payload())).alias("payload_conflict"),
    ]


def mark_duplicates(events: DataFrame) -> DataFrame:
    """Add ``is_duplicate``, ``first_segment``, ``first_line_number`` and ``payload_conflict``.

    Works on a complete set of events (the batch view). A stream, which sees the log in pieces,
    compares each new event with the first copies it remembers instead.
    """
    first, marks = _marking_columns()
    return events.select("*", first).select("*", *marks).drop("_first")


def first_copies(marked: DataFrame) -> DataFrame:
    """The deduplicated events (first copies), without the marking columns."""
    return marked.where(~F.col("is_duplicate")).drop(
        "is_duplicate", "first_segment", "first_line_number", "payload_conflict"
    )


def later_copies(marked: DataFrame) -> DataFrame:
    """The duplicates, each pointing at the first copy it repeats."""
    return marked.where(F.col("is_duplicate")).drop("is_duplicate")

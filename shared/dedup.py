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

__all__ = ["PAYLOAD_COLUMNS", "mark_duplicates", "first_copies", "later_copies"]

PAYLOAD_COLUMNS = ("account_id", "event_type", "amount", "currency", "event_time")


def _payload(prefix: str = "") -> Column:
    return F.struct(*[F.col(f"{prefix}{name}").alias(name) for name in PAYLOAD_COLUMNS])


def mark_duplicates(events: DataFrame) -> DataFrame:
    """Add ``is_duplicate``, ``first_segment``, ``first_line_number`` and ``payload_conflict``.

    Works on a complete set of events (the batch view). A stream, which sees the log in pieces,
    compares each new event with the first copies it remembers instead.
    """
    by_id = Window.partitionBy("event_id").orderBy("segment", "line_number")
    first = F.first(F.struct("segment", "line_number", _payload().alias("payload"))).over(
        by_id.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    )
    return (
        events.withColumn("_first", first)
        .withColumn(
            "is_duplicate",
            (F.col("_first.segment") != F.col("segment"))
            | (F.col("_first.line_number") != F.col("line_number")),
        )
        .withColumn("first_segment", F.col("_first.segment"))
        .withColumn("first_line_number", F.col("_first.line_number"))
        .withColumn("payload_conflict", F.col("is_duplicate") & (F.col("_first.payload") != _payload()))
        .drop("_first")
    )


def first_copies(marked: DataFrame) -> DataFrame:
    """The deduplicated events (first copies), without the marking columns."""
    return marked.where(~F.col("is_duplicate")).drop(
        "is_duplicate", "first_segment", "first_line_number", "payload_conflict"
    )


def later_copies(marked: DataFrame) -> DataFrame:
    """The duplicates, each pointing at the first copy it repeats."""
    return marked.where(F.col("is_duplicate")).drop("is_duplicate")

"""The batch view of the chain: the whole log through the rules the stream applies per batch.

``parse_events`` (in ``shared.events``) types and validates lines; ``classify_lines`` sorts every
parsed line into exactly one place: a deduplicated event, a duplicate, or a dead letter.
``classify_lines_after`` sorts the lines of later segments alone the same way, given the first
copies of the segments before. ``window_totals`` turns events into per-window totals. Dedup, windows and totals are the Arrow
rules of ``shared.dedup``, ``shared.windows`` and ``shared.aggregation`` run by Spark; the
speed layer (``shared.speed``) calls the same rules on each micro-batch. Where a rule needs
nothing but a row's own columns, Spark runs it as its own columns instead, and a test holds the
two equal: fixed windows (``in_spark``) summed by Spark, and the ids seen once, each its own
first copy. Jobs add only source, sink, trigger and checkpoint around these.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from shared.aggregation import AGGREGATE_SCHEMA, AMOUNT_TOTAL_TYPE, WINDOW_KEY, aggregate_windows_table
from shared.dedup import Copies, split_copies, split_copies_after
from shared.events import rejected_lines, valid_events
from shared.spark_arrow import per_key
from shared.windows import KEY_COLUMNS, RULE_COLUMNS, WindowSpec, assign_windows_table

__all__ = [
    "LineDispositions",
    "classify_lines",
    "classify_lines_after",
    "without_event_text",
    "window_totals",
    "window_totals_table",
]


@dataclass(frozen=True)
class LineDispositions:
    """Every input line in exactly one of three DataFrames: ``events``, ``duplicates`` (the two
    halves of the valid lines, as the dedup marked them: ``copies``) and ``dead_letters``."""

    copies: Copies
    dead_letters: DataFrame

    @property
    def events(self) -> DataFrame:
        return self.copies.firsts

    @property
    def duplicates(self) -> DataFrame:
        return self.copies.later

    def persisted(self) -> LineDispositions:
        """The same, with the dedup of repeated ids cached: it runs once however many results
        are read (the rest is a filter of the parsed lines, which the caller caches)."""
        return LineDispositions(self.copies.persisted(), self.dead_letters)

    @property
    def cached(self) -> tuple[DataFrame, ...]:
        """The frames ``persisted`` caches."""
        return self.copies.cached

    def release(self) -> None:
        self.copies.release()


def classify_lines(parsed: DataFrame) -> LineDispositions:
    """Split a complete set of parsed lines (``parse_events`` output) three ways (batch view).

    Validation comes first: a rejected line never takes an ``event_id``, so a bad copy cannot
    shadow the good one.
    """
    return LineDispositions(
        copies=split_copies(parsed.transform(valid_events)),
        dead_letters=parsed.transform(rejected_lines),
    )


def classify_lines_after(parsed: DataFrame, earlier: DataFrame) -> LineDispositions:
    """``classify_lines`` of the whole log, for the lines of segments ``F..N`` (``parsed``) alone:
    ``earlier`` holds the first copy of every id in segments ``1..F-1``
    (``shared.dedup.split_copies_after``). Validation and dead letters need nothing but the line."""
    return LineDispositions(
        copies=split_copies_after(parsed.transform(valid_events), earlier),
        dead_letters=parsed.transform(rejected_lines),
    )


def without_event_text(parsed: DataFrame) -> DataFrame:
    """``parse_events`` output with ``raw_line`` kept for the rejected lines only: what a batch
    keeps of every line (an event is its typed columns; a dead letter, its text)."""
    return parsed.withColumn("raw_line", F.when(F.col("reject_reason").isNotNull(), F.col("raw_line")))


def window_totals(spec: WindowSpec) -> Callable[[DataFrame], DataFrame]:
    """Events -> one row per window and key with ``event_count`` and ``amount_total``.

    Fixed windows: assigned by Spark (``in_spark``) and counted and summed by it, exactly
    (``amount`` widened to ``AMOUNT_TOTAL_TYPE`` before it is added, as ``aggregate_windows_table``
    sums). Sessions: the windows and totals of an account and currency in one Arrow call
    (``window_totals_table``).
    """

    def sessions(events: DataFrame) -> DataFrame:
        return per_key(
            events.select(*RULE_COLUMNS, "amount"),
            KEY_COLUMNS,
            functools.partial(window_totals_table, spec),
            AGGREGATE_SCHEMA,
        )

    def fixed(events: DataFrame) -> DataFrame:
        return (
            events.select(*KEY_COLUMNS, "event_time", "amount")
            .transform(spec.in_spark)
            .groupBy(*WINDOW_KEY)
            .agg(
                F.count(F.lit(1)).alias("event_count"),
                F.sum(F.col("amount").cast(AMOUNT_TOTAL_TYPE)).alias("amount_total"),
            )
        )

    return spec.pick(fixed=fixed, merging=sessions)


def window_totals_table(spec: WindowSpec, events: pa.Table) -> pa.Table:
    """``assign_windows_table`` then ``aggregate_windows_table``."""
    return aggregate_windows_table(assign_windows_table(spec, events))

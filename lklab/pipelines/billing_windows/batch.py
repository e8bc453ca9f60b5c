"""Batch recompute from the complete log: the Lambda batch layer's truth.

It runs through the truth runner as every pipeline's batch does (``lklab.truth_runner``: its
locks, its settings check, its writes and cost); what billing declares (``BillingTruth``) is
the chain and what is written how. Segments ``1..N`` go through the shared chain (validation,
dedup over the whole prefix, windows, aggregation) and the ``batch_truth`` rows of the
requested UTC days are replaced (every window when no day is given). ``N`` is recorded in
``batch_runs``: a rerun for the same days reads the same segments and writes the same rows,
unless ``refresh`` asks for the log's current end. Line-level results (``batch_dead_letter``,
``batch_duplicates``) depend only on the log prefix, so they are merged by line and grow with
it. ``batch_runs`` keeps one row per execution (position, counts, wall and CPU seconds): it is
the run history, the other tables are the data.

Run as ``lklab batch`` or ``spark-submit spark_jobs/batch_job.py --date D``.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from lklab.truth_runner import InsertNew, Replace, TruthOutput, TruthRule, TruthRun, run_truth
from shared.batch_chain import classify_lines, window_totals, without_event_text
from shared.batch_runs import BatchRun, record_run, recorded_position
from shared.catalog import BATCH_DEAD_LETTER, BATCH_DUPLICATES, BATCH_TRUTH
from shared.config import LabConfig
from shared.dedup import line_counts
from shared.events import parse_events
from shared.partitions import DayRange
from shared.table_settings import batch_settings
from shared.tables import Tables

__all__ = ["BILLING_TRUTH", "BillingTruth", "run_batch"]

LINE_KEY = ("segment", "line_number")
LINES_APP = "batch-lines"  # the line tables' commits, tagged with the last segment read


class BillingTruth(TruthRule):
    """Billing's batch: windowed sums for the days asked (``days``), from the position they were
    computed from before (``refresh``: the log's end; the runner's ``last_segment``: that one)."""

    pipeline = "billing_windows"
    tables = (BATCH_TRUTH, BATCH_DEAD_LETTER, BATCH_DUPLICATES)

    def settings(self, config: LabConfig) -> dict[str, str]:
        return batch_settings(config)  # the windows, and which lines are dead letters

    def position(self, tables: Tables, *, days: DayRange, refresh: bool) -> int | None:
        return None if refresh else recorded_position(tables, days)

    def compute(self, spark: SparkSession, raw: DataFrame, config: LabConfig, *, days: DayRange, **_) -> TruthOutput:
        parsed = (
            raw.transform(parse_events, max_clock_skew=config.max_clock_skew).transform(without_event_text).persist()
        )
        lines = classify_lines(parsed).persisted()
        truth = (
            lines.events.transform(window_totals(config.window)).where(days.contains(F.col("window_start"))).persist()
        )

        def figures(_tables) -> dict[str, Any]:
            day = F.to_date("window_start")  # in the session's time zone: UTC
            extent = truth.agg(
                F.count(F.lit(1)).alias("windows"), F.min(day).alias("first"), F.max(day).alias("last")
            ).first()
            return {**line_counts(parsed, lines.duplicates), **extent.asDict()}

        return TruthOutput(
            rows={BATCH_TRUTH: truth, BATCH_DEAD_LETTER: lines.dead_letters, BATCH_DUPLICATES: lines.duplicates},
            writes={
                BATCH_TRUTH: Replace(days.predicate()),
                BATCH_DEAD_LETTER: InsertNew(LINE_KEY, LINES_APP),
                BATCH_DUPLICATES: InsertNew(LINE_KEY, LINES_APP),
            },
            figures=figures,
            persisted=(parsed, truth, *lines.cached),
        )

    def recorded(self, tables: Tables, run: TruthRun, *, days: DayRange, **_) -> None:
        figures = run.figures
        if days.everything:
            written = (figures["first"], figures["last"]) if figures["windows"] else (None, None)
        else:
            written = (days.first, days.last)
        record_run(tables, _batch_run(run, days), written)


BILLING_TRUTH = BillingTruth()


def _batch_run(run: TruthRun, days: DayRange) -> BatchRun:
    figures = run.figures
    return BatchRun(
        last_segment=run.last_segment,
        lines=figures["lines"],
        events=figures["firsts"],
        duplicates=figures["duplicates"],
        dead_letters=figures["dead_letters"],
        heartbeats=figures["heartbeats"],
        days=days,
        windows=figures["windows"],
        wall_seconds=run.wall_seconds,
        cpu_seconds=run.cpu_seconds,
    )


def run_batch(
    spark: SparkSession,
    config: LabConfig,
    days: DayRange = DayRange(),
    *,
    refresh: bool = False,
    last_segment: int | None = None,
) -> BatchRun:
    """Recompute ``batch_truth`` for ``days`` from segments ``1..last_segment``.

    Without ``last_segment`` the position is the one recorded for these days, else (or with
    ``refresh``, or for every day) the log's current end. One recompute at a time per lake
    (``LockHeld`` otherwise); reconciliations wait while its tables change. Windows other than
    the ones ``batch_truth`` was built with are refused (``SettingsConflict``).
    """
    run = run_truth(spark, config, BILLING_TRUTH, days=days, refresh=refresh, last_segment=last_segment)
    return _batch_run(run, days)

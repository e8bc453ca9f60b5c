"""Batch recompute from the complete log: the Lambda batch layer's truth.

``run_batch`` reads segments ``1..N``, runs the shared chain (validation, dedup over the whole
prefix, windows, aggregation) and replaces the ``batch_truth`` rows of the requested UTC days
(every window when no day is given). ``N`` is recorded in ``batch_runs``: a rerun for the same
days reads the same segments and writes the same rows, unless ``refresh`` asks for the log's
current end. Line-level results (``batch_dead_letter``, ``batch_duplicates``) depend only on
the log prefix, so they are merged by line and grow with it. ``batch_runs`` keeps one row per
execution (position, counts, wall and CPU seconds): it is the run history, the other tables
are the data.

Run as ``lklab batch`` or ``spark-submit spark_jobs/batch_job.py --date D``.
"""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from lklab.progress import progress as track
from shared.batch_chain import classify_lines, window_totals, without_event_text
from shared.batch_runs import BATCH_TABLES_LOCK, BatchRun, record_run, recorded_position
from shared.catalog import BATCH_DEAD_LETTER, BATCH_DUPLICATES, BATCH_TRUTH
from shared.compute_cost import measure_cost
from shared.config import LabConfig
from shared.dedup import line_counts
from shared.eventlog import EventLog
from shared.locks import hold, writer
from shared.log_source import parsed_log
from shared.partitions import DayRange
from shared.table_settings import batch_settings, record, require
from shared.tables import Tables

__all__ = ["run_batch"]

LINE_KEY = ("segment", "line_number")


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
    lake = str(Path(config.lake).resolve())
    with writer(lake, "batch"), hold(lake, BATCH_TABLES_LOCK, wait=True):
        return _run_batch(spark, config, lake, days, refresh, last_segment)


def _run_batch(
    spark, config: LabConfig, lake: str, days: DayRange, refresh: bool, last_segment: int | None
) -> BatchRun:
    tables = Tables(spark, lake, config.table_engine)
    built_with = batch_settings(config)  # the windows, and which lines are dead letters
    require(tables, [BATCH_TRUTH.name], built_with)
    if last_segment is None and not refresh:
        last_segment = recorded_position(tables, days)
    last = EventLog(lake).last_segment() if last_segment is None else last_segment
    if last == 0:
        raise RuntimeError(f"the log under {lake} is empty: run 'lklab generate' or 'lklab ingest' first")
    with measure_cost(config.spark_master) as cost:
        parsed = (
            parsed_log(spark, lake, last, max_clock_skew=config.max_clock_skew, max_line_bytes=config.max_line_bytes)
            .transform(without_event_text)
            .persist()
        )
        lines = classify_lines(parsed).persisted()
        truth = (
            lines.events.transform(window_totals(config.window)).where(days.contains(F.col("window_start"))).persist()
        )
        with track("batch recompute: tables written", total=3) as writing:
            tables.overwrite(BATCH_TRUTH.name, truth, predicate=days.predicate())
            record(tables, [BATCH_TRUTH.name], built_with)
            writing.advance()
            tables.insert_new(
                BATCH_DEAD_LETTER.name, lines.dead_letters, keys=LINE_KEY, app_id="batch-lines", version=last
            )
            writing.advance()
            tables.insert_new(
                BATCH_DUPLICATES.name, lines.duplicates, keys=LINE_KEY, app_id="batch-lines", version=last
            )
            writing.advance()
        counts = line_counts(parsed, lines.duplicates)
        day = F.to_date("window_start")  # in the session's time zone: UTC
        extent = truth.agg(
            F.count(F.lit(1)).alias("windows"), F.min(day).alias("first"), F.max(day).alias("last")
        ).first()
        run = BatchRun(
            last_segment=last,
            lines=counts["lines"],
            events=counts["firsts"],
            duplicates=counts["duplicates"],
            dead_letters=counts["dead_letters"],
            heartbeats=counts["heartbeats"],
            days=days,
            windows=extent["windows"],
        )
        lines.release()
        for frame in (parsed, truth):
            frame.unpersist()
    run = BatchRun(**{**run.__dict__, "wall_seconds": cost.wall_seconds, "cpu_seconds": cost.cpu_seconds})
    if days.everything:
        written = (extent["first"], extent["last"]) if extent["windows"] else (None, None)
    else:
        written = (days.first, days.last)
    record_run(tables, run, written)
    return run

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

What a run keeps of the segments it read. ``batch_events`` holds each ``event_id``'s first copy
in log order among segments ``1..M``, its commit tagged ``M``. A later run to ``N >= M``, with
the line tables at ``M`` or beyond, reads segments ``M+1..N`` only: an id ``batch_events``
holds is a duplicate wherever it appears again (``shared.batch_chain.classify_lines_after``),
its new first copies are appended, and the days' windows are summed from the first copies
whose event time can fall in them (``batch_events`` read by event time; sessions read it
whole) and the new ones. Rows, duplicates and dead letters are exactly those of a run over
``1..N``; the lines a run counts (``batch_runs``) are the lines it read. Without
``batch_events`` (a lake written before it existed), or for a position before ``M``, the run
reads ``1..N`` (and writes ``batch_events`` whole when it is ahead).

Run as ``lklab batch`` or ``spark-submit spark_jobs/batch_job.py --date D``.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from lklab.truth_runner import Append, InsertNew, Replace, TruthOutput, TruthRule, TruthRun, run_truth
from shared.batch_chain import classify_lines, classify_lines_after, window_totals, without_event_text
from shared.batch_runs import BatchRun, record_run, recorded_position
from shared.catalog import BATCH_DEAD_LETTER, BATCH_DUPLICATES, BATCH_EVENTS, BATCH_TRUTH
from shared.config import LabConfig
from shared.dedup import line_counts
from shared.events import parse_events
from shared.partitions import DayRange
from shared.table_settings import batch_settings
from shared.tables import Tables
from shared.windows import window_reach

__all__ = ["BILLING_TRUTH", "BillingTruth", "run_batch"]

LINE_KEY = ("segment", "line_number")
LINES_APP = "batch-lines"  # the line tables' commits, tagged with the last segment read
EVENTS_APP = "batch-events"  # batch_events' commits, tagged with the last segment read


class BillingTruth(TruthRule):
    """Billing's batch: windowed sums for the days asked (``days``), from the position they were
    computed from before (``refresh``: the log's end; the runner's ``last_segment``: that one)."""

    pipeline = "billing_windows"
    # batch_events last: once it is tagged N, every other table holds what segments 1..N say
    tables = (BATCH_TRUTH, BATCH_DEAD_LETTER, BATCH_DUPLICATES, BATCH_EVENTS)

    def settings(self, config: LabConfig) -> dict[str, str]:
        return batch_settings(config)  # the windows, and which lines are dead letters

    def position(self, tables: Tables, *, days: DayRange, refresh: bool, **_) -> int | None:
        return None if refresh else recorded_position(tables, days)

    def first_segment(self, tables: Tables, last: int, *, whole_log: bool = False, **_) -> int:
        """After the segments ``batch_events`` has read, when the line tables have read them too
        and the run reads on from there (the module docstring); else (or with ``whole_log``) 1."""
        read = None if whole_log else tables.committed_version(BATCH_EVENTS.name, EVENTS_APP)
        if read is None or read > last:
            return 1
        lines = [tables.committed_version(table.name, LINES_APP) for table in (BATCH_DEAD_LETTER, BATCH_DUPLICATES)]
        return read + 1 if all(seen is not None and seen >= read for seen in lines) else 1

    def compute(
        self, spark: SparkSession, raw: DataFrame, config: LabConfig, *, days: DayRange, first_segment: int = 1, **_
    ) -> TruthOutput:
        parsed = (
            raw.transform(parse_events, max_clock_skew=config.max_clock_skew).transform(without_event_text).persist()
        )
        # batch_events in a few files, not one a task (a task reads a few segments): files of
        # 10,000 rows or more are read by Spark as Parquet, not through the driver (shared.tables)
        if first_segment == 1:
            lines = classify_lines(parsed).persisted()
            files = int(spark.conf.get("spark.sql.shuffle.partitions"))
            firsts, kept, events_write = lines.events, lines.events.coalesce(files), Replace(app_id=EVENTS_APP)
        else:
            earlier = Tables(spark, config.lake, config.table_engine).read(BATCH_EVENTS.name)
            lines = classify_lines_after(parsed, earlier).persisted()
            held = earlier.where(days.may_hold(F.col("event_time"), window_reach(config.window)))
            firsts = held.unionByName(lines.events)
            kept, events_write = lines.events.coalesce(1), Append(EVENTS_APP)
        truth = firsts.transform(window_totals(config.window)).where(days.contains(F.col("window_start"))).persist()

        def figures(_tables) -> dict[str, Any]:
            day = F.to_date("window_start")  # in the session's time zone: UTC
            extent = truth.agg(
                F.count(F.lit(1)).alias("windows"), F.min(day).alias("first"), F.max(day).alias("last")
            ).first()
            return {**line_counts(parsed, lines.duplicates), **extent.asDict(), "first_segment": first_segment}

        return TruthOutput(
            rows={
                BATCH_TRUTH: truth,
                BATCH_DEAD_LETTER: lines.dead_letters,
                BATCH_DUPLICATES: lines.duplicates,
                BATCH_EVENTS: kept,
            },
            writes={
                BATCH_TRUTH: Replace(days.predicate()),
                # a line of segment F or after is held only with a segment >= F
                BATCH_DEAD_LETTER: InsertNew(LINE_KEY, LINES_APP, among=f"segment >= {first_segment}"),
                BATCH_DUPLICATES: InsertNew(LINE_KEY, LINES_APP, among=f"segment >= {first_segment}"),
                BATCH_EVENTS: events_write,
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
        first_segment=figures["first_segment"],
    )


def run_batch(
    spark: SparkSession,
    config: LabConfig,
    days: DayRange = DayRange(),
    *,
    refresh: bool = False,
    last_segment: int | None = None,
    whole_log: bool = False,
) -> BatchRun:
    """Recompute ``batch_truth`` for ``days`` from segments ``1..last_segment``.

    The run reads on after the segments ``batch_events`` holds (the module docstring); with
    ``whole_log`` it reads from segment 1 whatever that table holds, and rewrites it.

    Without ``last_segment`` the position is the one recorded for these days, else (or with
    ``refresh``, or for every day) the log's current end. One recompute at a time per lake
    (``LockHeld`` otherwise); reconciliations wait while its tables change. Windows other than
    the ones ``batch_truth`` was built with are refused (``SettingsConflict``).
    """
    run = run_truth(
        spark, config, BILLING_TRUTH, days=days, refresh=refresh, last_segment=last_segment, whole_log=whole_log
    )
    return _batch_run(run, days)

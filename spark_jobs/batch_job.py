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

import datetime as dt
import sys
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from shared.compute_cost import measure_cost
from shared.config import LabConfig
from shared.eventlog import EventLog
from shared.log_source import parsed_log
from shared.partitions import DayRange
from shared.pipeline import classify_lines, window_totals, without_event_text
from shared.tables import Tables

__all__ = ["BatchRun", "run_batch", "recorded_position", "PositionError", "main"]

LINE_KEY = ("segment", "line_number")


class PositionError(ValueError):
    """The days asked for were computed from different log positions."""


@dataclass(frozen=True)
class BatchRun:
    """Where a batch recompute read up to, where every line went, and what it cost."""

    last_segment: int
    lines: int
    events: int
    duplicates: int
    dead_letters: int
    heartbeats: int = 0
    days: DayRange = DayRange()
    windows: int = 0
    wall_seconds: float = 0.0
    cpu_seconds: float = 0.0

    @property
    def conserved(self) -> bool:
        """Every line is an event, a duplicate, a dead letter or a heartbeat, exactly once."""
        return self.lines == self.events + self.duplicates + self.dead_letters + self.heartbeats


def recorded_position(tables: Tables, days: DayRange) -> int | None:
    """The segment the latest runs covering ``days`` read up to (None: never computed).

    Raises ``PositionError`` when the days were computed from different positions, or some
    were never computed: recomputing them together would silently change some of them.
    """
    if days.everything or not tables.exists("batch_runs"):
        return None
    runs = sorted(tables.read_arrow("batch_runs").to_pylist(), key=lambda r: r["run_number"])
    positions: dict[dt.date, int | None] = {}
    day = days.first
    while day <= days.last:
        covering = [r for r in runs if r["date_from"] is not None and r["date_from"] <= day <= r["date_to"]]
        positions[day] = covering[-1]["last_segment"] if covering else None
        day += dt.timedelta(days=1)
    distinct = set(positions.values())
    if len(distinct) > 1:
        detail = ", ".join(f"{d}: {'never' if p is None else f'segment {p}'}" for d, p in positions.items())
        raise PositionError(
            f"days {days.describe()} were computed from different log positions ({detail}); "
            "recompute them together from the log's current end with --refresh"
        )
    return distinct.pop()


def _record(tables: Tables, run: BatchRun, written_days: tuple[dt.date | None, dt.date | None]) -> None:
    runs = tables.read_arrow("batch_runs") if tables.exists("batch_runs") else None
    number = 1 if runs is None else max(runs["run_number"].to_pylist()) + 1
    row = {
        "run_number": pa.array([number], pa.int64()),
        "recorded_at": pa.array([dt.datetime.now(dt.timezone.utc)], pa.timestamp("us", tz="UTC")),
        "date_from": pa.array([written_days[0]], pa.date32()),
        "date_to": pa.array([written_days[1]], pa.date32()),
        "last_segment": pa.array([run.last_segment], pa.int64()),
        "lines": pa.array([run.lines], pa.int64()),
        "events": pa.array([run.events], pa.int64()),
        "duplicates": pa.array([run.duplicates], pa.int64()),
        "dead_letters": pa.array([run.dead_letters], pa.int64()),
        "heartbeats": pa.array([run.heartbeats], pa.int64()),
        "windows": pa.array([run.windows], pa.int64()),
        "wall_seconds": pa.array([run.wall_seconds], pa.float64()),
        "cpu_seconds": pa.array([run.cpu_seconds], pa.float64()),
    }
    tables.append("batch_runs", pa.table(row), app_id="batch-runs", version=number)


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
    ``refresh``, or for every day) the log's current end.
    """
    lake = str(Path(config.lake).resolve())
    tables = Tables(spark, lake, config.table_engine)
    if last_segment is None and not refresh:
        last_segment = recorded_position(tables, days)
    last = EventLog(lake).last_segment() if last_segment is None else last_segment
    if last == 0:
        raise RuntimeError(f"the log under {lake} is empty: run 'lklab generate' or 'lklab ingest' first")
    with measure_cost(config.spark_master) as cost:
        parsed = parsed_log(spark, lake, last, max_clock_skew=config.max_clock_skew, max_line_bytes=config.max_line_bytes).transform(without_event_text).persist()
        lines = classify_lines(parsed).persisted()
        truth = lines.events.transform(window_totals(config.window)).where(days.contains(F.col("window_start"))).persist()
        tables.overwrite("batch_truth", truth, predicate=days.predicate())
        tables.insert_new("batch_dead_letter", lines.dead_letters, keys=LINE_KEY, app_id="batch-lines", version=last)
        tables.insert_new("batch_duplicates", lines.duplicates, keys=LINE_KEY, app_id="batch-lines", version=last)
        counts = parsed.agg(
            F.count(F.lit(1)).alias("lines"),
            F.count_if("heartbeat").alias("heartbeats"),
            F.count("reject_reason").alias("dead_letters"),
        ).first()
        marks = lines.marked.agg(F.count_if(~F.col("is_duplicate")).alias("events"), F.count_if("is_duplicate").alias("duplicates")).first()
        day = F.to_date("window_start")  # in the session's time zone: UTC
        extent = truth.agg(F.count(F.lit(1)).alias("windows"), F.min(day).alias("first"), F.max(day).alias("last")).first()
        run = BatchRun(
            last_segment=last,
            lines=counts["lines"],
            events=marks["events"],
            duplicates=marks["duplicates"],
            dead_letters=counts["dead_letters"],
            heartbeats=counts["heartbeats"],
            days=days,
            windows=extent["windows"],
        )
        for frame in (parsed, lines.marked, truth):
            frame.unpersist()
    run = BatchRun(**{**run.__dict__, "wall_seconds": cost.wall_seconds, "cpu_seconds": cost.cpu_seconds})
    if days.everything:
        written = (extent["first"], extent["last"]) if extent["windows"] else (None, None)
    else:
        written = (days.first, days.last)
    _record(tables, run, written)
    return run


def main(argv: list[str] | None = None) -> int:
    """``spark-submit spark_jobs/batch_job.py [lklab batch flags]``, e.g. ``--date 2026-01-31``."""
    from lklab.cli import main as lklab

    return lklab(["batch", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())

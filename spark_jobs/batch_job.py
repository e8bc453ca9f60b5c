"""Batch recompute over the complete log: the Lambda batch layer's truth.

Reads segments 1..N (N = the newest at start, recorded so a rerun can read the same input),
runs the shared chain and replaces the ``batch_truth``, ``batch_dead_letter`` and
``batch_duplicates`` tables. Run as ``lklab batch`` or with ``spark-submit`` on this file.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from pyspark.sql import SparkSession

from shared.config import LabConfig, load_config
from shared.eventlog import EventLog
from shared.events import parse_events
from shared.log_source import SOURCE_NAME
from shared.pipeline import classify_lines, window_totals
from shared.spark_session import spark_session
from shared.tables import Tables

__all__ = ["BatchRun", "run_batch", "main"]


@dataclass(frozen=True)
class BatchRun:
    """Where a batch recompute read up to, and where every line went."""

    last_segment: int
    lines: int
    events: int
    duplicates: int
    dead_letters: int

    @property
    def conserved(self) -> bool:
        """Every line is an event, a duplicate or a dead letter, exactly once."""
        return self.lines == self.events + self.duplicates + self.dead_letters


def run_batch(spark: SparkSession, config: LabConfig, last_segment: int | None = None) -> BatchRun:
    """Recompute the truth tables from segments ``1..last_segment`` (default: all)."""
    lake = str(Path(config.lake).resolve())
    last = EventLog(lake).last_segment() if last_segment is None else last_segment
    if last == 0:
        raise RuntimeError(f"the log under {lake} is empty: run 'lklab generate' or 'lklab ingest' first")
    raw = spark.read.format(SOURCE_NAME).option("path", lake).option("end", last).load()
    parsed = raw.transform(parse_events).persist()
    lines = classify_lines(parsed)
    tables = Tables(spark, lake, config.table_engine)
    tables.overwrite("batch_truth", lines.events.transform(window_totals(config.window)))
    tables.overwrite("batch_dead_letter", lines.dead_letters)
    tables.overwrite("batch_duplicates", lines.duplicates)
    run = BatchRun(
        last_segment=last,
        lines=parsed.count(),
        events=lines.events.count(),
        duplicates=tables.read_arrow("batch_duplicates").num_rows,
        dead_letters=tables.read_arrow("batch_dead_letter").num_rows,
    )
    parsed.unpersist()
    return run


def main(argv: list[str] | None = None) -> int:
    """``spark-submit spark_jobs/batch_job.py [CONFIG_FILE]``: settings from file and env."""
    argv = sys.argv[1:] if argv is None else argv
    config = load_config(argv[0] if argv else None)
    run = run_batch(spark_session(config, "lklab-batch"), config)
    print(
        f"batch recompute read segments 1..{run.last_segment}: {run.lines} lines = {run.events} events "
        f"+ {run.duplicates} duplicates + {run.dead_letters} dead letters"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

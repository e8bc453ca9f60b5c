"""The ``unique_visitors`` batch truth: the rule over every first copy of the complete log.

``run_visitors_batch`` reads segments ``1..N`` (the log's end now), parses them with
``parse_page_views``, deduplicates over the whole log (``shared.dedup``) and runs the rule
(``lklab.pipelines.unique_visitors.rule``) per user through Spark. It replaces:

* ``visitors_truth_members``: one row per (window, user, URL) with its views and first line;
* ``visitors_truth``: ``distinct_urls`` per (window, user), the number of those members;
* ``visitors_batch_duplicates`` and ``visitors_batch_dead_letter``: the later copies and the
  rejected lines of the log.

Each rerun rewrites them from the log as it is then (the log only grows, so the rows only
grow). Windows or line settings (``max-clock-skew``, ``max-line-bytes``) other than the ones the
tables were built with are refused (``SettingsConflict``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pyspark.sql import SparkSession
from pyspark.sql.pandas.types import from_arrow_schema

from lklab.pipelines.unique_visitors.parse import (
    PAYLOAD_COLUMNS,
    parse_page_views,
    rejected_lines,
    valid_page_views,
)
from lklab.pipelines.unique_visitors.rule import COUNT_SCHEMA, distinct_url_counts_table, truth_members
from lklab.pipelines.unique_visitors.tables import (
    VISITORS_BATCH_DEAD_LETTER,
    VISITORS_BATCH_DUPLICATES,
    VISITORS_BATCH_TABLES,
    VISITORS_TRUTH,
    VISITORS_TRUTH_MEMBERS,
)
from shared.compute_cost import measure_cost
from shared.config import LabConfig
from shared.dedup import first_copies, later_copies, line_counts, mark_duplicates
from shared.eventlog import EventLog
from shared.locks import hold, writer
from shared.log_source import raw_log
from shared.spark_arrow import per_key
from shared.table_settings import batch_settings, record, require
from shared.tables import Tables

__all__ = ["VISITORS_BATCH_LOCK", "VisitorsBatchRun", "run_visitors_batch"]

# Held while the batch tables change; a reconciliation reads them under it, shared.
VISITORS_BATCH_LOCK = "visitors-batch-tables"


@dataclass(frozen=True)
class VisitorsBatchRun:
    """What a batch read and found: every line is a view's first copy, a duplicate, a dead
    letter or a heartbeat (``conserved``); ``windows``: (window, user) rows of the truth."""

    last_segment: int
    lines: int
    views: int
    duplicates: int
    dead_letters: int
    heartbeats: int
    windows: int
    members: int
    wall_seconds: float = 0.0
    cpu_seconds: float = 0.0

    @property
    def conserved(self) -> bool:
        return self.lines == self.views + self.duplicates + self.dead_letters + self.heartbeats


def run_visitors_batch(spark: SparkSession, config: LabConfig) -> VisitorsBatchRun:
    """Recompute the ``unique_visitors`` truth from the whole log (one batch at a time per lake)."""
    lake = str(Path(config.lake).resolve())
    with writer(lake, "visitors-batch"), hold(lake, VISITORS_BATCH_LOCK, wait=True):
        return _run(spark, config, lake)


def _run(spark: SparkSession, config: LabConfig, lake: str) -> VisitorsBatchRun:
    tables = Tables(spark, lake, config.table_engine)
    settings = batch_settings(config)  # the windows, and the line settings that decide the dead letters
    require(tables, [VISITORS_TRUTH.name, VISITORS_TRUTH_MEMBERS.name], settings)
    last = EventLog(lake).last_segment()
    if last == 0:
        raise RuntimeError(f"the log under {lake} is empty: run 'lklab generate --pipeline unique_visitors' first")
    with measure_cost(config.spark_master) as cost:
        raw = raw_log(spark, lake, last, max_line_bytes=config.max_line_bytes)
        parsed = raw.transform(parse_page_views, max_clock_skew=config.max_clock_skew).persist()
        marked = mark_duplicates(valid_page_views(parsed), PAYLOAD_COLUMNS).persist()
        members = first_copies(marked).transform(truth_members(config.window)).persist()
        counts = per_key(members, ["user_id"], distinct_url_counts_table, from_arrow_schema(COUNT_SCHEMA))
        tables.overwrite(VISITORS_TRUTH_MEMBERS.name, members)
        tables.overwrite(VISITORS_TRUTH.name, counts)
        tables.overwrite(
            VISITORS_BATCH_DUPLICATES.name, later_copies(marked).select(*VISITORS_BATCH_DUPLICATES.schema.names)
        )
        tables.overwrite(
            VISITORS_BATCH_DEAD_LETTER.name, rejected_lines(parsed).select(*VISITORS_BATCH_DEAD_LETTER.schema.names)
        )
        record(tables, [table.name for table in VISITORS_BATCH_TABLES], settings)
        counts = line_counts(parsed, later_copies(marked))
        run = VisitorsBatchRun(
            last_segment=last,
            lines=counts["lines"],
            views=counts["firsts"],
            duplicates=counts["duplicates"],
            dead_letters=counts["dead_letters"],
            heartbeats=counts["heartbeats"],
            windows=tables.read(VISITORS_TRUTH.name).count(),
            members=members.count(),
        )
        for frame in (parsed, marked, members):
            frame.unpersist()
    return VisitorsBatchRun(**{**run.__dict__, "wall_seconds": cost.wall_seconds, "cpu_seconds": cost.cpu_seconds})

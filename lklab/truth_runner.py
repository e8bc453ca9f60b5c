"""The batch-truth runner: every pipeline's truth over the whole log, run one way.

A pipeline's batch declares what differs as a ``TruthRule``: its name, its locks, the tables it
replaces, the settings their rows depend on, and ``compute``, which turns the log's raw lines
into the rows of each table (``TruthOutput``). ``run_truth`` runs it:

* ``writer_role``: one batch per lake at a time (``shared.locks.writer``; a second one is
  refused with ``LockHeld``); ``tables_lock`` held exclusively while the tables change (a
  reader holds it shared, so it never sees them half rewritten; the batch waits for readers);
* the rule's ``settings`` required of every table it replaces before anything is read
  (``SettingsConflict`` for tables built with others) and recorded on each once written;
* an empty log refused (``RuntimeError`` naming ``lklab generate --pipeline NAME``);
* segments ``1..N`` (the log's end now) read through Spark (``shared.log_source.raw_log``)
  into ``compute``;
* every table replaced with its rows, in the rule's order: the table's columns in its order
  (Arrow rows also cast to its schema), each commit tagged ``(app_id, N)`` when the rule has an
  ``app_id`` (a rerun at the same position then commits nothing again), untagged otherwise;
* the figures taken once the tables are written, the frames ``compute`` persisted released,
  and the wall and CPU seconds of it all measured (``shared.compute_cost``).

Nothing here knows a pipeline.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession

from shared import catalog
from shared.compute_cost import measure_cost
from shared.config import LabConfig
from shared.eventlog import EventLog
from shared.locks import hold, writer
from shared.log_source import raw_log
from shared.table_settings import record, require
from shared.tables import Tables

__all__ = ["truth_lock", "TruthOutput", "TruthRule", "TruthRun", "run_truth"]


@dataclass(frozen=True)
class TruthOutput:
    """What ``compute`` found: the ``rows`` of every table the batch replaces; ``figures``, what
    the run reports (``lines``, ``duplicates`` ...), asked for once the tables are written (a
    figure may count a written table); ``persisted``: the frames ``compute`` persisted, released
    after the figures."""

    rows: Mapping[catalog.Table, DataFrame | pa.Table]
    figures: Callable[[Tables], Mapping[str, int]]
    persisted: tuple[DataFrame, ...] = ()


def truth_lock(pipeline: str) -> str:
    """The lock held exclusively while ``pipeline``'s truth tables change, shared by their readers."""
    return f"{pipeline}-truth-tables"


class TruthRule:
    """What one pipeline's batch declares to the runner (the module docstring).

    ``pipeline`` names it in messages and its locks: ``writer_role`` (``<pipeline>-batch``),
    its writer lock, and ``tables_lock`` (``truth_lock``), the lock its readers hold shared;
    ``tables`` everything it replaces, in write order; ``app_id`` tags each commit
    ``(app_id, last segment)``, None leaves the commits untagged."""

    pipeline: str
    tables: tuple[catalog.Table, ...]
    app_id: str | None = None

    @property
    def writer_role(self) -> str:
        return f"{self.pipeline}-batch"

    @property
    def tables_lock(self) -> str:
        return truth_lock(self.pipeline)

    def settings(self, config: LabConfig) -> dict[str, str]:
        """What the tables record: the settings their rows depend on."""
        raise NotImplementedError

    def compute(self, spark: SparkSession, raw: DataFrame, config: LabConfig) -> TruthOutput:
        """The rows of every table from the log's raw lines (``RAW_LINE_SCHEMA``)."""
        raise NotImplementedError


@dataclass(frozen=True)
class TruthRun:
    """One run: the position it read to, the rule's figures, and what it cost (seconds)."""

    last_segment: int
    figures: Mapping[str, int]
    wall_seconds: float = 0.0
    cpu_seconds: float = 0.0


def run_truth(spark: SparkSession, config: LabConfig, rule: TruthRule) -> TruthRun:
    """Replace ``rule``'s tables with its truth over the whole log (one batch at a time per lake)."""
    lake = str(Path(config.lake).resolve())
    with writer(lake, rule.writer_role), hold(lake, rule.tables_lock, wait=True):
        tables = Tables(spark, lake, config.table_engine)
        settings = rule.settings(config)
        names = [table.name for table in rule.tables]
        require(tables, names, settings)
        last = EventLog(lake).last_segment()
        if last == 0:
            raise RuntimeError(f"the log under {lake} is empty: run 'lklab generate --pipeline {rule.pipeline}' first")
        with measure_cost(config.spark_master) as cost:
            output = rule.compute(spark, raw_log(spark, lake, last, max_line_bytes=config.max_line_bytes), config)
            missing = [table.name for table in rule.tables if table not in output.rows]
            if missing:
                raise ValueError(f"the {rule.pipeline} truth has no rows for {', '.join(missing)}")
            for table in rule.tables:
                tables.overwrite(
                    table.name,
                    _as_table(table, output.rows[table]),
                    app_id=rule.app_id,
                    version=None if rule.app_id is None else last,
                )
            record(tables, names, settings)
            figures = dict(output.figures(tables))
            for frame in output.persisted:
                frame.unpersist()
    return TruthRun(last, figures, cost.wall_seconds, cost.cpu_seconds)


def _as_table(table: catalog.Table, rows: DataFrame | pa.Table) -> DataFrame | pa.Table:
    """``rows`` with ``table``'s columns in its order (Arrow rows cast to its schema)."""
    schema = table.schema
    if isinstance(rows, pa.Table):
        return rows.select(schema.names).cast(schema)
    return rows.select(*schema.names)

"""The batch-truth runner: every pipeline's truth over the whole log, run one way.

A pipeline's batch declares what differs as a ``TruthRule``: its name, its locks, the tables it
replaces, the settings their rows depend on, and ``compute``, which turns the log's raw lines
into the rows of each table (``TruthOutput``). ``run_truth`` runs it:

* ``writer_role``: one batch per lake at a time (``shared.locks.writer``; a second one is
  refused with ``LockHeld``); ``tables_lock`` held exclusively while the tables change (a
  reader holds it shared, so it never sees them half rewritten; the batch waits for readers);
* the rule's ``settings`` required of every table it replaces before anything is read
  (``SettingsConflict`` for tables built with others) and recorded on each once written;
* an empty log refused (``RuntimeError`` naming ``lklab generate``, with ``--pipeline NAME``);
* segments ``F..N`` read through Spark (``shared.log_source.raw_log``) into ``compute``: ``N``
  the ``last_segment`` asked (a prefix of the log), else the rule's ``position`` (where a rerun
  of the same rows read to before, say), else the log's end now; ``F`` the rule's
  ``first_segment`` (1 unless the rule keeps what it found in the segments before: an index of
  the events read, say);
* every table written with its rows, in the rule's order, with the table's columns in its order
  (Arrow rows also cast to its schema): replaced whole (``Replace()``, the default), each commit
  tagged ``(app_id, N)`` when the rule (or the ``Replace``) has an ``app_id`` (a rerun at the
  same position then commits nothing again); replaced where a predicate holds
  (``Replace(where)``: the days asked, say); merged, the rows of new keys appended
  (``InsertNew``); or appended, tagged ``(app_id, N)`` (``Append``);
* the figures taken once the tables are written, the frames ``compute`` persisted released,
  and the wall and CPU seconds of it all measured (``shared.compute_cost``); then the rule's
  ``recorded`` (its run history), still under the locks.

``options`` (the days asked, say) go to the rule's ``position``, ``compute`` and ``recorded``.

Nothing here knows a pipeline.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession

from lklab.commands import command_line
from lklab.progress import progress as track
from shared import catalog
from shared.compute_cost import measure_cost
from shared.config import LabConfig
from shared.eventlog import EventLog
from shared.locks import hold, writer
from shared.log_source import raw_log
from shared.table_settings import record, require
from shared.tables import Tables

__all__ = ["truth_lock", "Append", "InsertNew", "Replace", "TruthOutput", "TruthRule", "TruthRun", "run_truth"]


@dataclass(frozen=True)
class Replace:
    """A table's rows replaced by the batch's: all of them, or with ``where`` (a SQL predicate,
    e.g. the days asked) only those matching it, the others kept. A whole replace is tagged
    ``(app_id, last segment)`` with its own ``app_id``, else the rule's when it has one; a
    partial one is not (a rerun for other rows at the same position must commit)."""

    where: str | None = None
    app_id: str | None = None


@dataclass(frozen=True)
class InsertNew:
    """The batch's rows whose ``keys`` the table lacks appended, the others left: rows that
    depend on the log alone and grow with it (a line's dead letter, say). Tagged ``(app_id, last
    segment)``: a rerun at the same position commits nothing. ``among``: a SQL condition every
    row of the table that can share keys with the batch's holds (the segments read, say), so
    that the others are not read; None: any row can."""

    keys: tuple[str, ...]
    app_id: str
    among: str | None = None


@dataclass(frozen=True)
class Append:
    """The batch's rows appended, tagged ``(app_id, last segment)``: rows of segments the table
    has not seen (the rule reads from after them). A rerun at the same position commits nothing."""

    app_id: str


@dataclass(frozen=True)
class TruthOutput:
    """What ``compute`` found: the ``rows`` of every table the batch writes, and how each is
    written (``writes``; ``Replace()`` where absent); ``figures``, what the run reports
    (``lines``, ``duplicates`` ...), asked for once the tables are written (a figure may count a
    written table); ``persisted``: the frames ``compute`` persisted, released after the
    figures."""

    rows: Mapping[catalog.Table, DataFrame | pa.Table]
    figures: Callable[[Tables], Mapping[str, Any]]
    persisted: tuple[DataFrame, ...] = ()
    writes: Mapping[catalog.Table, Replace | InsertNew | Append] = field(default_factory=dict)


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

    def compute(self, spark: SparkSession, raw: DataFrame, config: LabConfig, **options: Any) -> TruthOutput:
        """The rows of every table from the log's raw lines (``RAW_LINE_SCHEMA``): of segments
        ``first_segment`` on when the rule's ``first_segment`` is not 1 (then passed), else all."""
        raise NotImplementedError

    def first_segment(self, tables: Tables, last: int, **options: Any) -> int:
        """The first segment to read for a run to ``last``: 1 (the whole log) unless the rule
        keeps, in its tables, what it needs of the segments before."""
        return 1

    def position(self, tables: Tables, **options: Any) -> int | None:
        """The last segment to read (None: the log's end now), e.g. where a rerun of the same
        rows read to before."""
        return None

    def recorded(self, tables: Tables, run: TruthRun, **options: Any) -> None:
        """What the rule records of a finished run (its run history, say), under its locks."""


@dataclass(frozen=True)
class TruthRun:
    """One run: the position it read to, the rule's figures, and what it cost (seconds)."""

    last_segment: int
    figures: Mapping[str, int]
    wall_seconds: float = 0.0
    cpu_seconds: float = 0.0

    @property
    def lines(self) -> int:
        """The lines of the log it read (the rule's ``lines`` figure)."""
        return self.figures["lines"]


def run_truth(
    spark: SparkSession, config: LabConfig, rule: TruthRule, *, last_segment: int | None = None, **options: Any
) -> TruthRun:
    """Write ``rule``'s tables with its truth over segments ``1..last_segment`` (default: the
    rule's position, else the whole log), one batch at a time per lake; ``options`` go to the
    rule's ``position``, ``compute`` and ``recorded``."""
    lake = str(Path(config.lake).resolve())
    with writer(lake, rule.writer_role), hold(lake, rule.tables_lock, wait=True):
        tables = Tables(spark, lake, config.table_engine)
        settings = rule.settings(config)
        names = [table.name for table in rule.tables]
        require(tables, names, settings)
        last = rule.position(tables, **options) if last_segment is None else last_segment
        last = EventLog(lake).last_segment() if last is None else last
        if last == 0:
            raise RuntimeError(f"the log under {lake} is empty: run '{command_line(rule.pipeline, 'generate')}' first")
        with measure_cost(config.spark_master) as cost:
            first = rule.first_segment(tables, last, **options)
            raw = raw_log(spark, lake, last, first_segment=first, max_line_bytes=config.max_line_bytes)
            later = {"first_segment": first} if first > 1 else {}  # compute reads a part of the log
            output = rule.compute(spark, raw, config, **later, **options)
            missing = [table.name for table in rule.tables if table not in output.rows]
            if missing:
                raise ValueError(f"the {rule.pipeline} truth has no rows for {', '.join(missing)}")
            with track(f"{rule.pipeline} batch: tables written", total=len(rule.tables)) as writing:
                for table in rule.tables:
                    _write(tables, table, output, rule.app_id, last)
                    writing.advance()
            record(tables, names, settings)
            figures = dict(output.figures(tables))
            for frame in output.persisted:
                frame.unpersist()
        run = TruthRun(last, figures, cost.wall_seconds, cost.cpu_seconds)
        rule.recorded(tables, run, **options)
    return run


def _write(tables: Tables, table: catalog.Table, output: TruthOutput, app_id: str | None, last: int) -> None:
    rows, how = _as_table(table, output.rows[table]), output.writes.get(table, Replace())
    if isinstance(how, InsertNew):
        tables.insert_new(table.name, rows, keys=how.keys, app_id=how.app_id, version=last, among=how.among)
    elif isinstance(how, Append):
        tables.append(table.name, rows, app_id=how.app_id, version=last)
    elif how.where is not None:
        tables.overwrite(table.name, rows, predicate=how.where)
    else:
        app_id = how.app_id or app_id
        tables.overwrite(table.name, rows, app_id=app_id, version=None if app_id is None else last)


def _as_table(table: catalog.Table, rows: DataFrame | pa.Table) -> DataFrame | pa.Table:
    """``rows`` with ``table``'s columns in its order (Arrow rows cast to its schema)."""
    schema = table.schema
    if isinstance(rows, pa.Table):
        return rows.select(schema.names).cast(schema)
    return rows.select(*schema.names)

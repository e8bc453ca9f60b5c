"""The reconcile runner: a stream (the live one or a replay) against the batch truth, read one way.

Every pipeline's reconciliation reads two sides and compares them with its own rule. What the
reading needs is the same for all, and written here once:

* **one reconcile per stream at a time**: the writer lock ``<pipeline>-reconcile-<stream>``
  (a rerun's records are idempotent, but two at once would race on them);
* **the truth as one moment**: read under the truth's lock held shared (``truth_lock``: a
  batch rewriting the truth waits), each table at the version it had when the reconcile began;
  ``truth_position(tables, **options)`` says how far the truth read the log (None: there is
  no truth; the rule may refuse the options' part of it, the days asked say);
* **the stream as one moment**: its tables at the last micro-batch whose state committed
  (``shared.stream_cut``): a live stream commits a micro-batch table by table, its state last,
  so a reconcile beside it never pairs one batch's rows with the next one's; a replay's tables,
  written once, are read as they stand; ``read_through``, the last segment the stream had
  read, is the largest ``last_segment`` of its metrics table at that cut;
* **the same settings on both sides** where the rows depend on them (``agreed``: the keys the
  truth's and the stream's tables must have recorded alike, ``SettingsConflict`` otherwise);
* inputs missing: a ``ReconcileInputError`` (``reconciliation.reconcile``: bad input, exit 2)
  naming the command that writes them.

What differs is declared in a ``ReconcileRule``: the stream's ``StreamRule`` (its state, the
commit point, and its metrics), the tables of each side, and ``compare(sides)``,
the pipeline's own rule over a ``Sides`` reading; it returns the pipeline's result (the command
line renders it with ``reconciliation.render.render_text``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame, SparkSession

from lklab.commands import command_line
from lklab.live_stream import StreamRule
from lklab.truth_runner import truth_lock
from reconciliation.reconcile import ReconcileInputError, stream_prefix
from shared import catalog
from shared.catalog import replay_name
from shared.config import LabConfig
from shared.locks import hold, writer
from shared.stream_cut import stream_cut
from shared.table_settings import agreed
from shared.tables import Tables

__all__ = ["ReconcileInputError", "ReconcileRule", "Sides", "reconcile_stream", "reconcile_lock"]


@dataclass(frozen=True)
class ReconcileRule:
    """What one pipeline's reconciliation declares (the module docstring).

    ``stream_tables`` are read at the stream's cut, ``truth_tables`` at the versions they had
    when the reconcile began; ``agreed``: the settings keys the first truth table and the first
    stream table must have recorded alike; ``compare(sides)``: the pipeline's rule."""

    pipeline: str
    stream: StreamRule
    stream_tables: tuple[catalog.Table, ...]
    truth_tables: tuple[catalog.Table, ...]
    truth_position: Callable[..., int | None]
    compare: Callable[..., Any]
    agreed: tuple[str, ...] = ()


@dataclass(frozen=True)
class Sides:
    """The two sides as one moment each: read them through ``truth``/``stream`` (Arrow) or
    ``truth_frame``/``stream_frame`` (Spark). ``batch``: the stream's last completed micro-batch
    (None: a replay's tables, written once); ``truth_segment``/``read_through``: the last segment
    each side read."""

    against: str
    prefix: str
    config: LabConfig
    tables: Tables
    truth_segment: int
    read_through: int
    batch: int | None
    truth_versions: dict[str, int]
    stream_versions: dict[str, int]

    @property
    def spark(self) -> SparkSession:
        return self.tables.spark

    @property
    def lake(self) -> Path:
        return Path(self.config.lake).resolve()

    def truth(self, table: catalog.Table) -> pa.Table:
        return self._arrow(table.name, self.truth_versions, table)

    def stream(self, table: catalog.Table) -> pa.Table:
        return self._arrow(table.at(self.prefix), self.stream_versions, table)

    def truth_frame(self, table: catalog.Table) -> DataFrame:
        return self._frame(table.name, self.truth_versions, table)

    def stream_frame(self, table: catalog.Table) -> DataFrame:
        return self._frame(table.at(self.prefix), self.stream_versions, table)

    def _arrow(self, name: str, versions: dict[str, int], table: catalog.Table) -> pa.Table:
        if name not in versions:  # not written yet at the cut: no rows
            return table.schema.empty_table()
        return self.tables.read_arrow(name, versions[name])

    def _frame(self, name: str, versions: dict[str, int], table: catalog.Table) -> DataFrame:
        if name not in versions:
            return table.empty(self.spark)
        return self.tables.read(name, versions[name])


def reconcile_lock(pipeline: str, prefix: str) -> str:
    """The writer lock of a reconcile of the stream under ``prefix``: ``<pipeline>-reconcile-speed``,
    ``<pipeline>-reconcile-kappa.RUN``."""
    return f"{pipeline}-reconcile-{(prefix or 'speed/').rstrip('/').replace('/', '.')}"


def reconcile_stream(
    spark: SparkSession, config: LabConfig, rule: ReconcileRule, against: str = "speed", **options
) -> Any:
    """Read both sides of ``rule`` as one moment each and return ``rule.compare(sides, **options)``."""
    prefix = stream_prefix(against)
    lake = Path(config.lake).resolve()
    with (
        writer(lake, reconcile_lock(rule.pipeline, prefix)),
        hold(lake, truth_lock(rule.pipeline), shared=True, wait=True),
    ):
        sides = _sides(Tables(spark, lake, config.table_engine), config, rule, against, prefix, options)
        return rule.compare(sides, **options)


def _sides(
    tables: Tables, config: LabConfig, rule: ReconcileRule, against: str, prefix: str, options: dict[str, Any]
) -> Sides:
    truth_segment = rule.truth_position(tables, **options)
    if truth_segment is None:
        raise ReconcileInputError(f"no batch truth: run '{command_line(rule.pipeline, 'batch')}' first")
    state = rule.stream.layout[-1].table.at(prefix)
    if not tables.exists(state):
        run = replay_name(prefix)
        command = f"replay --name {run}" if run else "speed"
        raise ReconcileInputError(f"no stream under '{against}': run '{command_line(rule.pipeline, command)}' first")
    if rule.agreed:  # SettingsConflict when they differ
        agreed(tables, [rule.truth_tables[0].name, rule.stream_tables[0].at(prefix)], rule.agreed)
    truth_versions = {t.name: tables.version(t.name) for t in rule.truth_tables if tables.exists(t.name)}
    metrics = rule.stream.metrics
    names = [table.at(prefix) for table in {*rule.stream_tables, metrics, rule.stream.layout[-1].table}]
    cut = stream_cut(tables.root, names, state)
    name = metrics.at(prefix)
    read = tables.read_arrow(name, cut.versions[name]) if name in cut.versions else metrics.schema.empty_table()
    read_through = pc.max(read["last_segment"]).as_py() or 0
    return Sides(against, prefix, config, tables, truth_segment, read_through, cut.batch, truth_versions, cut.versions)

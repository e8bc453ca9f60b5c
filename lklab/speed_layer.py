"""The speed layer: an always-on Structured Streaming job over the durable log.

Source: the log, one segment per micro-batch by default, offsets in Spark's checkpoint, parsed
and validated by ``parse_events`` as part of the streaming query (analysed once, not per batch).
Each micro-batch is collected once as Arrow; ``shared.speed.stream_step`` classifies it against
the state carried from the batch before (the log's clock, the remembered first copies, the
windows held), and the results are committed. What it decides depends on the log alone, not
on how the log is cut into micro-batches. Exactly once: every write is a Delta commit tagged
``(app_id, batch_id)`` and skipped when already committed, and the state table is written last,
so a micro-batch replayed after a crash reads the state from before it and commits nothing
twice; one whose state is already committed is skipped whole.

Per batch that is one Spark query and up to six Delta commits. The state stays in memory from
one batch to the next (read from ``stream_state`` when a process starts and after a batch found
already committed), and the five output commits run side by side before the state's.

Crash points (``lklab.crash_points``) at the start of each batch and around each commit let
the tests kill it anywhere. An always-on layer keeps the log's clock moving while no traffic
arrives (``lklab.heartbeats``): once it has read everything, holds open windows, and the log has
not grown for ``heartbeat-interval``, it appends a heartbeat line to the log, which it then
reads like any other, as a replay will.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame, SparkSession

from lklab.crash_points import committing, crash_point
from lklab.heartbeats import marks_busy
from lklab.live_stream import checkpoint_for, start_over_log, stream_lock, watch
from shared import catalog
from shared.aggregation import WINDOW_KEY
from shared.catalog import DEAD_LETTER, DUPLICATE_EVENTS, LATE_EVENTS, SPEED_AGGREGATES, STREAM_METRICS, STREAM_STATE
from shared.config import LabConfig
from shared.eventlog import format_timestamp
from shared.events import parse_events
from shared.speed import StreamSettings, stream_step
from shared.stream_metrics import batch_figures, metrics_table
from shared.stream_state import StreamState, state_from_table, state_table
from shared.table_settings import record, require, stream_settings
from shared.tables import Tables

__all__ = ["SpeedLayer", "run_speed", "SPEED_TABLES"]

SPEED_TABLES = tuple(table.name for table in catalog.SPEED_TABLES)  # under the layer's prefix
log = logging.getLogger("lklab.speed")


@dataclass
class _Carried:
    """What micro-batch ``batch_id`` starts from."""

    batch_id: int
    state: StreamState


@dataclass
class SpeedLayer:
    """Processes micro-batches into the tables ``<prefix><table>``."""

    spark: SparkSession
    config: LabConfig
    app_id: str = "speed"
    prefix: str = ""

    def __post_init__(self) -> None:
        self.tables = Tables(self.spark, self.config.lake, self.config.table_engine, keep_open=True)
        self.settings = StreamSettings.of(self.config)
        self.busy = threading.Event()
        self.progress: list = []  # Spark's progress reports of the query's recent micro-batches
        self._carried: _Carried | None = None
        self.last_segment_read = 0
        self.bound = stream_settings(self.config)  # recorded on every table the layer writes
        self._recorded = False
        self._writers = ThreadPoolExecutor(max_workers=len(SPEED_TABLES) - 1, thread_name_prefix="lklab-commit")

    def table(self, table: catalog.Table) -> str:
        """The name of ``table`` under the layer's prefix."""
        return table.at(self.prefix)

    def close(self) -> None:
        self._writers.shutdown()

    def _resume(self, batch_id: int) -> _Carried:
        """The state before ``batch_id``: carried, or read once."""
        if self._carried is not None and self._carried.batch_id == batch_id:
            return self._carried
        name = self.table(STREAM_STATE)
        state = state_from_table(self.tables.read_arrow(name)) if self.tables.exists(name) else StreamState.empty()
        return _Carried(batch_id, state)

    @property
    def holds_open_state(self) -> bool:
        """Windows the watermark has not finalised yet are held (what a heartbeat can move on)."""
        carried = self._carried
        return carried is not None and bool(pc.any(pc.equal(carried.state.windows["status"], "open")).as_py())

    def _write(self, batch_id: int, table: catalog.Table, action) -> None:
        with committing(batch_id, table.name):
            action(self.table(table))

    def _append_rows(self, name: str, rows: pa.Table, batch_id: int) -> None:
        """Append a batch's rows once. A batch without rows commits nothing (once the table
        exists): there is nothing a replay could repeat, and most batches have no side output."""
        if rows.num_rows or not self.tables.exists(name):
            self.tables.append(name, rows, app_id=self.app_id, version=batch_id)

    def _merge_windows(self, name: str, changes: pa.Table, batch_id: int) -> None:
        if changes.num_rows:
            since = format_timestamp(pc.min(changes["window_end"]).as_py())
            self.tables.upsert(
                name,
                changes,
                keys=WINDOW_KEY,
                app_id=self.app_id,
                version=batch_id,
                target_filter=f"t.window_end >= '{since}'",
            )

    @marks_busy
    def process(self, lines: DataFrame, batch_id: int) -> None:
        """``foreachBatch`` body: classify the batch's parsed lines and commit each result once."""
        started = time.monotonic()
        crash_point(batch_id, "start")
        if self.tables.already_committed(self.table(STREAM_STATE), self.app_id, batch_id):
            self._carried = None  # done before a crash; the next batch reads what it left
            return
        parsed = lines.toArrow()
        if parsed.num_rows:
            self.last_segment_read = max(self.last_segment_read, pc.max(parsed["segment"]).as_py())
        carried = self._resume(batch_id)
        step = stream_step(parsed, carried.state, self.settings, batch_id)
        figures = batch_figures(batch_id, parsed, step, time.monotonic() - started)
        metrics = metrics_table([figures])
        writes = {
            DEAD_LETTER: lambda n: self._append_rows(n, step.dead_letters, batch_id),
            DUPLICATE_EVENTS: lambda n: self._append_rows(n, step.duplicates, batch_id),
            LATE_EVENTS: lambda n: self._append_rows(n, step.late_events, batch_id),
            SPEED_AGGREGATES: lambda n: self._merge_windows(n, step.window_changes, batch_id),
            STREAM_METRICS: lambda n: self.tables.append(n, metrics, app_id=self.app_id, version=batch_id),
        }
        for done in [self._writers.submit(self._write, batch_id, name, action) for name, action in writes.items()]:
            done.result()
        # The state is the commit point: written last, so a replay before it sees the old state.
        self._write(
            batch_id,
            STREAM_STATE,
            lambda n: self.tables.overwrite(n, state_table(step.state), app_id=self.app_id, version=batch_id),
        )
        self._carried = _Carried(batch_id + 1, step.state)
        log.info(_log_line(self.app_id, self.prefix, figures, time.monotonic() - started))
        if not self._recorded:
            record(self.tables, [self.table(table) for table in catalog.SPEED_TABLES], self.bound)
            self._recorded = True


def _log_line(app_id: str, prefix: str, figures, seconds: float) -> str:
    """One JSON object per micro-batch: what it read, where the lines went, how far behind."""
    return json.dumps(
        {
            "event": "micro-batch",
            "stream": prefix + app_id,
            "batch": figures.batch_id,
            "segments": [figures.first_segment, figures.last_segment],
            "lines": figures.input_lines,
            "on_time": figures.on_time,
            "late": figures.late,
            "duplicates": figures.duplicates,
            "dead_letters": figures.dead_letters,
            "heartbeats": figures.heartbeats,
            "watermark_lag_seconds": figures.watermark_lag_seconds,
            "seconds": round(seconds, 3),
        }
    )


def run_speed(
    spark: SparkSession,
    config: LabConfig,
    *,
    available_now: bool = False,
    segments_per_batch: int = 1,
    trigger_interval: str = "1 second",
    app_id: str = "speed",
    prefix: str = "",
    stop: threading.Event | None = None,
) -> SpeedLayer:
    """Run the speed layer until the log is consumed (``available_now``) or ``stop`` is set.

    One process at a time per table prefix and app: a second one is refused (``LockHeld``)."""
    lake = Path(config.lake).resolve()
    with stream_lock(lake, prefix, app_id):
        return _run_speed(
            spark, config, lake, available_now, segments_per_batch, trigger_interval, app_id, prefix, stop
        )


def _run_speed(
    spark, config, lake, available_now, segments_per_batch, trigger_interval, app_id, prefix, stop
) -> SpeedLayer:
    layer = SpeedLayer(spark, config, app_id, prefix)
    require(layer.tables, [layer.table(table) for table in catalog.SPEED_TABLES], layer.bound)
    metrics = layer.table(STREAM_METRICS)
    checkpoint = checkpoint_for(
        lake,
        prefix,
        app_id,
        layer.tables,
        metrics,
        f"tables {metrics} already hold batches of '{app_id}' but its checkpoint {{checkpoint}} is missing: batch ids would "
        "restart and be skipped as done. Restore the checkpoint, or start over with new tables (another --name or a fresh lake).",
    )
    query = start_over_log(
        spark,
        config,
        lake,
        checkpoint,
        layer.process,
        segments_per_batch=segments_per_batch,
        available_now=available_now,
        trigger_interval=trigger_interval,
        parse=parse_events,
    )
    try:
        watch(
            query,
            layer,
            config,
            lake,
            available_now=available_now,
            stop=stop,
            what="speed layer",
            stop_between_batches=True,
        )
    finally:
        layer.close()
        layer.progress = query.recentProgress
    return layer

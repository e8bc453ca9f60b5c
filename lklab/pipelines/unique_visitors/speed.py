"""The ``unique_visitors`` speed layer: Structured Streaming over the log, distinct URLs per window.

Source: the log (``shared.log_source``), ``segments_per_batch`` segments per micro-batch, offsets
in Spark's checkpoint (``<lake>/checkpoints/<prefix>visitors-speed``), parsed by
``parse_page_views`` inside the streaming query. Each micro-batch is collected once as Arrow and
``lklab.pipelines.unique_visitors.step.visitors_step`` decides where every line goes, against the state carried
in memory from the batch before (read from ``visitors_state`` when the process starts). What it
decides depends on the log alone, not on how it is cut into micro-batches.

Exactly once, as the billing speed layer (``lklab.speed_layer``): every write is a Delta commit
tagged ``(app_id, batch_id)`` and skipped when already committed. ``visitors_seen`` (each user's
URLs seen within the state TTL, ``lklab.pipelines.unique_visitors.state.seen_table``) is rewritten after each
batch, and ``visitors_state`` is written last, so a micro-batch replayed after a crash starts
from the state before it and commits nothing twice, and one whose state is already committed is
skipped whole. ``VisitorTables`` is that commit, shared with the replay
(``lklab.pipelines.unique_visitors.replay``). Crash points (``lklab.crash_points``: ``start``,
``before:``/``after:`` each table) let the tests kill it anywhere in a batch
(``tests/test_visitors_jobs.py``).

Always on (without ``available_now``), it appends a heartbeat to a log quiet for
``heartbeat-interval`` while it holds windows the watermark has not made final
(``lklab.heartbeats``), so they become final without new traffic.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame, SparkSession

from lklab.crash_points import committing, crash_point
from lklab.heartbeats import marks_busy
from lklab.live_stream import checkpoint_for, start_over_log, stream_lock, watch
from lklab.pipelines.unique_visitors.metrics import visitor_metrics_row
from lklab.pipelines.unique_visitors.parse import PARSED_SCHEMA, parse_page_views
from lklab.pipelines.unique_visitors.rule import WINDOW_KEY
from lklab.pipelines.unique_visitors.state import VisitorState, seen_table, state_from_table, state_table
from lklab.pipelines.unique_visitors.step import VisitorBatch, VisitorSettings, visitors_step
from lklab.pipelines.unique_visitors.tables import (
    VISITORS_DEAD_LETTER,
    VISITORS_DUPLICATES,
    VISITORS_LATE_EVENTS,
    VISITORS_MEMBERS,
    VISITORS_SEEN,
    VISITORS_SPEED_TABLES,
    VISITORS_STATE,
    VISITORS_STREAM_METRICS,
    VISITORS_WINDOWS,
)
from shared import catalog
from shared.config import LabConfig
from shared.eventlog import format_timestamp
from shared.table_settings import record, require, stream_settings
from shared.tables import Tables
from shared.watermark import is_final
from shared.windows import micros

__all__ = [
    "APP_ID",
    "COMMIT_ORDER",
    "VisitorTables",
    "VisitorsSpeedLayer",
    "run_visitors_speed",
    "visitor_settings",
    "visitors_table_settings",
]

APP_ID = "visitors-speed"
log = logging.getLogger("lklab.visitors")


def visitor_settings(config: LabConfig) -> VisitorSettings:
    """The stream step's settings from the lab's configuration."""
    return VisitorSettings(
        config.window,
        config.watermark_delay,
        config.allowed_lateness,
        config.dedup_horizon,
        config.state_ttl,
        config.watermark_interval,
    )


def visitors_table_settings(config: LabConfig) -> dict[str, str]:
    """What the stream's tables record (``shared.table_settings``): the stream's settings and the state TTL."""
    return {**stream_settings(config), "state-ttl": config.describe()["state-ttl"]}


# The tables a micro-batch commits, in the order ``VisitorTables.commit`` writes them: the state last.
COMMIT_ORDER = (
    VISITORS_DEAD_LETTER,
    VISITORS_DUPLICATES,
    VISITORS_LATE_EVENTS,
    VISITORS_MEMBERS,
    VISITORS_WINDOWS,
    VISITORS_STREAM_METRICS,
    VISITORS_SEEN,
    VISITORS_STATE,
)


@dataclass
class VisitorTables:
    """The stream's tables under ``prefix``, written once per ``(app_id, batch_id)``."""

    tables: Tables
    prefix: str
    app_id: str
    settings: dict[str, str]
    _recorded: bool = field(default=False, init=False)

    def name(self, table: catalog.Table) -> str:
        return table.at(self.prefix)

    def require_settings(self) -> None:
        require(self.tables, [self.name(table) for table in VISITORS_SPEED_TABLES], self.settings)

    def committed(self, batch_id: int) -> bool:
        return self.tables.already_committed(self.name(VISITORS_STATE), self.app_id, batch_id)

    def read_state(self) -> VisitorState:
        name = self.name(VISITORS_STATE)
        return state_from_table(self.tables.read_arrow(name)) if self.tables.exists(name) else VisitorState.empty()

    def _append(self, table: catalog.Table, rows: pa.Table, batch_id: int) -> None:
        # A batch without rows commits nothing once the table exists: there is nothing to repeat.
        name = self.name(table)
        with committing(batch_id, table.name):
            if rows.num_rows or not self.tables.exists(name):
                self.tables.append(name, rows, app_id=self.app_id, version=batch_id)

    def _merge_windows(self, changes: pa.Table, batch_id: int) -> None:
        name = self.name(VISITORS_WINDOWS)
        with committing(batch_id, VISITORS_WINDOWS.name):
            if changes.num_rows or not self.tables.exists(name):
                since = format_timestamp(pc.min(changes["window_end"]).as_py()) if changes.num_rows else None
                rows = changes.append_column(
                    "_delete", pa.array([False] * changes.num_rows, pa.bool_())
                )  # a served row is never deleted
                self.tables.upsert(
                    name,
                    rows,
                    keys=WINDOW_KEY,
                    app_id=self.app_id,
                    version=batch_id,
                    target_filter=f"t.window_end >= '{since}'" if since else None,
                )

    def commit(self, batch_id: int, parsed: pa.Table, step: VisitorBatch) -> None:
        """Commit micro-batch ``batch_id``'s rows, the state last (the commit point), each
        between its crash points (``lklab.crash_points``; the replay's one batch has them too)."""
        self._append(VISITORS_DEAD_LETTER, step.dead_letters, batch_id)
        self._append(VISITORS_DUPLICATES, step.duplicates, batch_id)
        self._append(VISITORS_LATE_EVENTS, step.late, batch_id)
        self._append(VISITORS_MEMBERS, step.members, batch_id)
        self._merge_windows(step.windows, batch_id)
        with committing(batch_id, VISITORS_STREAM_METRICS.name):
            self.tables.append(
                self.name(VISITORS_STREAM_METRICS),
                visitor_metrics_row(batch_id, parsed, step),
                app_id=self.app_id,
                version=batch_id,
            )
        with committing(batch_id, VISITORS_SEEN.name):
            self.tables.overwrite(
                self.name(VISITORS_SEEN), seen_table(step.state, batch_id), app_id=self.app_id, version=batch_id
            )
        with committing(batch_id, VISITORS_STATE.name):
            self.tables.overwrite(
                self.name(VISITORS_STATE), state_table(step.state), app_id=self.app_id, version=batch_id
            )
        if not self._recorded:
            record(self.tables, [self.name(table) for table in VISITORS_SPEED_TABLES], self.settings)
            self._recorded = True


@dataclass
class VisitorsSpeedLayer:
    """``foreachBatch`` body: one micro-batch of parsed lines into the stream's tables."""

    sink: VisitorTables
    settings: VisitorSettings
    _state: tuple[int, VisitorState] | None = None  # (the batch it is the state before, the state)
    batches: int = 0
    last_segment_read: int = 0
    busy: threading.Event = field(default_factory=threading.Event)

    @property
    def holds_open_state(self) -> bool:
        """The state holds a window the watermark has not made final (what a heartbeat can move on)."""
        if self._state is None:
            return False
        state = self._state[1]
        ends = micros(state.members["window_end"])
        return bool((~is_final(ends, state.clock.watermark_after(self.settings.clock))).any())

    @marks_busy
    def process(self, lines: DataFrame, batch_id: int) -> None:
        started = time.monotonic()
        crash_point(batch_id, "start")
        if self.sink.committed(batch_id):
            self._state = None  # done before a restart; the next batch reads the state it left
            return
        parsed = lines.toArrow().select(PARSED_SCHEMA.names).cast(PARSED_SCHEMA)
        if parsed.num_rows:
            self.last_segment_read = max(self.last_segment_read, pc.max(parsed["segment"]).as_py())
        state = self._state[1] if self._state and self._state[0] == batch_id else self.sink.read_state()
        step = visitors_step(parsed, state, self.settings, batch_id)
        self.sink.commit(batch_id, parsed, step)
        self._state = (batch_id + 1, step.state)
        self.batches += 1
        log.info(
            json.dumps(
                {
                    "event": "micro-batch",
                    "stream": self.sink.prefix + self.sink.app_id,
                    "batch": batch_id,
                    "lines": step.input_lines,
                    "new_urls": int(pc.sum(step.outcomes["new_urls"]).as_py() or 0) if step.outcomes.num_rows else 0,
                    "late_pairs": step.late.num_rows,
                    "duplicates": step.duplicates.num_rows,
                    "dead_letters": step.dead_letters.num_rows,
                    "state_entries": step.state_entries,
                    "seconds": round(time.monotonic() - started, 3),
                }
            )
        )


def run_visitors_speed(
    spark: SparkSession,
    config: LabConfig,
    *,
    available_now: bool = False,
    segments_per_batch: int = 1,
    trigger_interval: str = "1 second",
    prefix: str = "",
    app_id: str = APP_ID,
    stop: threading.Event | None = None,
) -> VisitorsSpeedLayer:
    """Run the stream until the log is consumed (``available_now``) or ``stop`` is set.

    One process at a time per table prefix: a second one is refused (``LockHeld``); tables built
    with other settings are refused (``SettingsConflict``)."""
    lake = Path(config.lake).resolve()
    with stream_lock(lake, prefix, app_id):
        sink = VisitorTables(
            Tables(spark, lake, config.table_engine, keep_open=True), prefix, app_id, visitors_table_settings(config)
        )
        sink.require_settings()
        checkpoint = checkpoint_for(
            lake,
            prefix,
            app_id,
            sink.tables,
            sink.name(VISITORS_STREAM_METRICS),
            f"tables {prefix}{VISITORS_STREAM_METRICS.name} already hold batches of '{app_id}' but its checkpoint "
            "{checkpoint} is missing: batch ids would restart and be skipped as done. Restore the checkpoint, "
            "or start over with a fresh lake",
        )
        layer = VisitorsSpeedLayer(sink, visitor_settings(config))
        query = start_over_log(
            spark,
            config,
            lake,
            checkpoint,
            layer.process,
            segments_per_batch=segments_per_batch,
            available_now=available_now,
            trigger_interval=trigger_interval,
            parse=parse_page_views,
        )
        watch(query, layer, config, lake, available_now=available_now, stop=stop, what="unique_visitors speed layer")
        return layer

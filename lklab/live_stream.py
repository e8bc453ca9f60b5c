"""The live stream runner: every pipeline's always-on stream over the lab's log, run one way.

A pipeline's stream declares what differs as a ``StreamRule``: how a micro-batch's lines are
parsed, the step that sends each line somewhere against the state carried from the batch before
(Arrow, no I/O), the tables it writes (a ``lklab.stream_sink`` layout, the state last) and
whether its state holds something a heartbeat could make final. ``LiveStream`` is the one
``foreachBatch`` body: the crash point ``start``, a micro-batch already committed skipped whole,
the state carried in memory (read from the state table when a process starts and after a batch
found committed), the step, the sink's exactly-once commit, one JSON log line per micro-batch.
The metrics row is committed once the other outputs are, stamped with that moment and the live
latency of the batch's lines (``lklab.line_latency``: from each segment's publication in the
log to then).
``run_live`` runs it:

* ``stream_lock``: one process per table prefix and app (``shared.locks.writer``; a second one
  is refused with ``LockHeld``);
* ``checkpoint_for``: ``<lake>/checkpoints/<prefix><app_id>``, refused when it is missing while
  the stream's tables already hold batches (its batch ids would restart at 0 and be skipped as
  already committed);
* ``start_over_log``: the log source (``shared.log_source``) read at most ``segments_per_batch``
  segments per micro-batch into ``process``, once to the end (``available_now``: one segment per
  micro-batch unless told) or every ``trigger_interval`` (up to ``CATCH_UP_SEGMENTS`` unless
  told: a stream behind takes its backlog at once instead of one segment a trigger, which at one
  segment a second of traffic would never catch up);
* ``watch``: waits for the query, stops it once ``stop`` is set, appends heartbeats to a quiet
  log while always on (``lklab.heartbeats``), and raises when the query failed.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming import StreamingQuery

from lklab.crash_points import crash_point
from lklab.heartbeats import Heartbeats, HeartbeatStream, marks_busy
from lklab.line_latency import LineLatency, line_latency, lines_per_segment, with_latency
from lklab.stream_sink import SinkTable, StreamSink
from shared import catalog
from shared.config import LabConfig
from shared.eventlog import EventLog
from shared.locks import stream_role, writer
from shared.log_source import log_stream_reader
from shared.session_conf import session_conf
from shared.tables import Rows, Tables

__all__ = [
    "StreamRule",
    "StateKind",
    "METRICS_SUFFIX",
    "CATCH_UP_SEGMENTS",
    "StepOutput",
    "LiveStream",
    "run_live",
    "OnExecutors",
    "checkpoint_for",
    "checkpoint_path",
    "start_over_log",
    "stream_lock",
    "watch",
]


def stream_lock(lake: Path, prefix: str, app_id: str) -> AbstractContextManager:
    """The lock a live stream holds while it runs (``LockHeld`` when another process has it)."""
    return writer(lake, stream_role(prefix, app_id))


def checkpoint_path(lake: Path, prefix: str, name: str) -> Path:
    """Where the checkpoint ``name`` of a stream under ``prefix`` is: ``<lake>/checkpoints/<prefix><name>``."""
    return lake / "checkpoints" / (prefix + name)


def checkpoint_for(lake: Path, prefix: str, name: str, tables: Tables, progress_table: str, refusal: str) -> Path:
    """The stream's checkpoint (``checkpoint_path``); a ``RuntimeError`` saying ``refusal`` (its
    ``{checkpoint}`` filled in) when it is missing while ``progress_table`` (a table written by
    every batch) exists."""
    checkpoint = checkpoint_path(lake, prefix, name)
    if not checkpoint.exists() and tables.exists(progress_table):
        raise RuntimeError(refusal.replace("{checkpoint}", str(checkpoint)))
    return checkpoint


def start_over_log(
    spark: SparkSession,
    config: LabConfig,
    lake: Path,
    checkpoint: Path,
    process: Callable[[Any, int], None],
    *,
    segments_per_batch: int,
    available_now: bool,
    trigger_interval: str,
    parse: Callable | None = None,
    operators: Callable[[DataFrame], DataFrame] | None = None,
    query_settings: Mapping[str, str] | None = None,
) -> StreamingQuery:
    """Start the query: log lines (parsed by ``parse(lines, max_clock_skew=...)`` when given,
    raw otherwise, then through the stateful ``operators`` when given) into
    ``process(frame, batch_id)`` for each micro-batch."""
    lines = (
        log_stream_reader(spark)
        .option("path", str(lake))
        .option("segmentsPerBatch", segments_per_batch)
        .option("maxLineBytes", config.max_line_bytes)
        .load()
    )
    if parse is not None:
        lines = lines.transform(parse, max_clock_skew=config.max_clock_skew)
    if operators is not None:
        lines = operators(lines)
    stream = lines.writeStream.foreachBatch(process).option("checkpointLocation", str(checkpoint))
    stream = stream.trigger(availableNow=True) if available_now else stream.trigger(processingTime=trigger_interval)
    # A query runs on a copy of the session's settings taken when it starts: ``query_settings``
    # are this query's alone.
    with session_conf(spark, dict(query_settings or {})):
        return stream.start()


def watch(
    query: StreamingQuery,
    stream: HeartbeatStream,
    config: LabConfig,
    lake: Path,
    *,
    available_now: bool,
    stop: threading.Event | None,
    what: str,
    stop_between_batches: bool = False,
) -> None:
    """Wait for ``query`` to end (``available_now``) or for ``stop``; ``stop_between_batches``
    holds the stop until no micro-batch is being processed (``stream.busy`` clear). Raises
    ``RuntimeError("<what> failed: ...")`` when the query ended with an exception."""
    stop = stop or threading.Event()
    heartbeats = None if available_now else Heartbeats(stream, EventLog(lake), config.heartbeat_interval)
    while query.isActive:
        query.awaitTermination(0.5)
        if stop.is_set() and not (stop_between_batches and stream.busy.is_set()):
            query.stop()
        elif heartbeats is not None:
            heartbeats.check()
    if query.exception() is not None:
        raise RuntimeError(f"{what} failed: {query.exception()}")


@dataclass(frozen=True)
class StepOutput:
    """One micro-batch's result: the ``rows`` of each table of the layout, the ``state`` after
    it, and the ``figures`` its log line reports."""

    rows: Mapping[catalog.Table, Rows]
    state: Any
    figures: Mapping[str, Any]


def _as_read(lines: pa.Table, config: LabConfig) -> pa.Table:
    return lines


@dataclass(frozen=True)
class OnExecutors:
    """A stream whose step runs in the query itself, on the executors, its state in Spark's
    state store: ``operators(parsed, settings)``, the stateful operators the parsed lines go
    through before ``foreachBatch``; ``query_settings(spark)``, the settings the query starts
    with (fixed into its checkpoint by Spark); ``batch(frame, folder)``, a micro-batch's rows
    from the operators as the rule's step takes them, in place of the collected lines (read by
    one Spark job: the operators run once; ``folder(table)`` is where a table of the layout
    lives, for rows its tasks write there, ``shared.staged_files``), and ``segments(batch)``
    the lines it read per segment (``{segment: lines}``); ``checkpoint``, the query's
    checkpoint's name, apart from the driver step's (``app_id``)."""

    operators: Callable[[DataFrame, Any], DataFrame]
    query_settings: Callable[[SparkSession], Mapping[str, str]]
    batch: Callable[[DataFrame, Callable[[catalog.Table], Path]], Any]
    segments: Callable[[Any], Mapping[int, int]]
    checkpoint: str


def _never_open(state: Any, settings: Any) -> bool:
    return False


def _no_settings(config: LabConfig) -> None:
    return None


@dataclass(frozen=True)
class StateKind:
    """What the runners need of a stream's state, whatever it holds: ``empty()``, the state
    before the first micro-batch; ``from_table(rows)``, the state as its table (the layout's
    last) holds it, which a process starting or a micro-batch found committed resumes from;
    ``holds_open(state, settings)``, whether it holds something the watermark has not made
    final, which a heartbeat on a quiet log can move on (default: never)."""

    empty: Callable[[], Any]
    from_table: Callable[[pa.Table], Any]
    holds_open: Callable[[Any, Any], bool] = _never_open


# At most this many segments a micro-batch of an always-on stream takes (what it holds in memory
# at once), unless told otherwise: more than a trigger's traffic, so a stream behind catches up.
CATCH_UP_SEGMENTS = 100

# What a stream's table of one row per micro-batch is called, under its pipeline's prefix
# (``stream_metrics``, ``payments_stream_metrics`` ...).
METRICS_SUFFIX = "stream_metrics"


@dataclass(frozen=True)
class StreamRule:
    """What one pipeline's stream declares to the runner (the module docstring).

    ``what`` names the stream in messages; ``app_id`` is the live stream's commit id and lock;
    ``layout`` its tables in commit order, the state last. ``settings(config)``: the step's
    settings (default: none, the step gets None); ``table_settings(config)``: what its tables
    record (the settings their rows depend on). ``parse``: a Spark transform of the log's lines run inside the streaming query
    (``parse(lines, max_clock_skew=...)``; None: the raw lines are collected), and
    ``read(lines, config)`` what the collected lines become for the step (a ``segment`` column
    kept). ``on_executors``: where the step runs in the query itself (an ``OnExecutors``; the step
    is given its micro-batch's rows from the operators and no state, None); None: on the driver,
    against the state the runner carries. ``state``: what the state is to the runners (a
    ``StateKind``).
    ``step(parsed, state, settings, batch_id, started)``: one micro-batch (``started``: its
    ``time.monotonic()`` start) as a ``StepOutput``. ``logger``: the logger of its one JSON line per micro-batch
    (default: ``lklab.<app_id>``). ``metrics``: its table of one row per micro-batch
    (``batch_id``, ``last_segment`` read, and ``watermark_lag_seconds`` where it has a
    watermark), what ``lklab health`` reads: the layout's table named ``...stream_metrics``
    (``METRICS_SUFFIX``), None when it has none. ``whole_log(lines, config, **options)``: for a
    rule whose outcome over a whole log can be computed in parallel, that computation (the log's
    parsed lines in, a ``lklab.replay_runner.WholeLog`` out: the rows walking the log
    micro-batch by micro-batch leaves), which a replay runs instead of the walk; None: a replay
    walks the log.

    ``run(spark, config, **options)`` runs it live (``run_live``)."""

    what: str
    app_id: str
    layout: tuple[SinkTable, ...]
    table_settings: Callable[[LabConfig], dict[str, str]]
    state: StateKind
    step: Callable[[pa.Table, Any, Any, int, float], StepOutput]
    settings: Callable[[LabConfig], Any] = _no_settings
    parse: Callable | None = None
    read: Callable[[pa.Table, LabConfig], pa.Table] = _as_read
    logger: str = ""
    whole_log: Callable[..., Any] | None = None
    on_executors: OnExecutors | None = None

    @property
    def metrics(self) -> catalog.Table | None:
        return next((entry.table for entry in self.layout if entry.table.name.endswith(METRICS_SUFFIX)), None)

    def __post_init__(self) -> None:
        if not self.logger:
            object.__setattr__(self, "logger", f"lklab.{self.app_id}")

    def run(self, spark: SparkSession, config: LabConfig, **options: Any) -> LiveStream:
        """Run the stream until the log is consumed (``available_now``) or ``stop`` is set
        (``options``: ``run_live``'s)."""
        return run_live(spark, config, self, **options)


@dataclass
class LiveStream:
    """``foreachBatch`` body of one pipeline's stream: micro-batches into ``sink``'s tables."""

    rule: StreamRule
    sink: StreamSink
    settings: Any
    config: LabConfig
    batches: int = 0
    last_segment_read: int = 0
    progress: list = field(default_factory=list)  # Spark's progress reports of the query's recent micro-batches
    busy: threading.Event = field(default_factory=threading.Event)
    latency: LineLatency | None = None  # the live latency of the last micro-batch committed
    _carried: tuple[int, Any] | None = None  # (the batch it is the state before, the state)

    @property
    def tables(self):
        return self.sink.tables

    def table(self, table: catalog.Table) -> str:
        """The name of ``table`` under the stream's prefix."""
        return self.sink.name(table)

    @property
    def state(self) -> Any:
        """The state carried to the next micro-batch (None: none carried)."""
        return None if self._carried is None else self._carried[1]

    @property
    def holds_open_state(self) -> bool:
        return self._carried is not None and self.rule.state.holds_open(self._carried[1], self.settings)

    def _resume(self, batch_id: int) -> Any:
        if self._carried is not None and self._carried[0] == batch_id:
            return self._carried[1]
        rows = self.sink.read_state()
        return self.rule.state.empty() if rows is None else self.rule.state.from_table(rows)

    @marks_busy
    def process(self, lines: DataFrame, batch_id: int) -> None:
        """Classify the micro-batch's lines and commit each result once, the state last (``lines``:
        the parsed lines, or the operators' rows of a step on the executors)."""
        started, began = time.monotonic(), time.time()
        crash_point(batch_id, "start")
        if self.sink.committed(batch_id):
            self._carried = None  # done before a restart; the next batch reads the state it left
            if self.rule.on_executors is not None:
                # Its tables hold it; its stateful operators' state does not until the batch has
                # run through them again (Spark fails a batch whose state stores did not commit).
                lines.write.format("noop").mode("overwrite").save()
            return
        executors = self.rule.on_executors
        if executors is None:
            batch = self.rule.read(lines.toArrow(), self.config)
            per_segment, state = lines_per_segment(batch), self._resume(batch_id)
        else:
            batch = executors.batch(lines, lambda table: self.tables.path(self.table(table)))
            per_segment, state = executors.segments(batch), None
        if per_segment:
            self.last_segment_read = max(self.last_segment_read, max(per_segment))
        log = EventLog(self.config.lake)
        published = {segment: log.published_at(segment) for segment in per_segment}
        output = self.rule.step(batch, state, self.settings, batch_id, started)

        def stamped(rows: pa.Table) -> pa.Table:
            self.latency = line_latency(per_segment, published, time.time(), began)
            return with_latency(rows, self.latency)

        metrics = self.rule.metrics
        self.sink.commit(batch_id, output.rows, after_outputs=None if metrics is None else (metrics, stamped))
        self._carried = (batch_id + 1, output.state)
        self.batches += 1
        latency = {} if self.latency is None else {"latency_p95_seconds": self.latency.p95}
        logging.getLogger(self.rule.logger).info(
            json.dumps(
                {
                    "event": "micro-batch",
                    "stream": self.sink.prefix + self.sink.app_id,
                    "batch": batch_id,
                    **output.figures,
                    **latency,
                    "seconds": round(time.monotonic() - started, 3),
                }
            )
        )


def run_live(
    spark: SparkSession,
    config: LabConfig,
    rule: StreamRule,
    *,
    available_now: bool = False,
    segments_per_batch: int | None = None,
    trigger_interval: str = "1 second",
    app_id: str | None = None,
    prefix: str = "",
    stop: threading.Event | None = None,
) -> LiveStream:
    """Run ``rule``'s stream until the log is consumed (``available_now``) or ``stop`` is set
    (after the micro-batch under way), at most ``segments_per_batch`` segments per micro-batch
    (None: one with ``available_now``, else ``CATCH_UP_SEGMENTS``).

    One process at a time per table prefix and app: a second one is refused (``LockHeld``);
    tables built with other settings are refused (``SettingsConflict``)."""
    lake = Path(config.lake).resolve()
    app_id = app_id or rule.app_id
    with stream_lock(lake, prefix, app_id):
        tables = Tables(spark, lake, config.table_engine, keep_open=True)
        sink = StreamSink(tables, prefix, app_id, rule.layout, rule.table_settings(config))
        sink.require_settings()
        executors = rule.on_executors
        checkpoint = checkpoint_for(
            lake,
            prefix,
            app_id if executors is None else executors.checkpoint,
            tables,
            sink.name(sink.state),
            f"table {sink.name(sink.state)} already holds batches of '{app_id}' but its checkpoint {{checkpoint}} is "
            "missing: batch ids would restart and be skipped as done. Restore the checkpoint, or start over with new "
            "tables (another --name or a fresh lake).",
        )
        stream = LiveStream(rule, sink, rule.settings(config), config)
        query = start_over_log(
            spark,
            config,
            lake,
            checkpoint,
            stream.process,
            segments_per_batch=segments_per_batch or (1 if available_now else CATCH_UP_SEGMENTS),
            available_now=available_now,
            trigger_interval=trigger_interval,
            parse=rule.parse,
            operators=None if executors is None else lambda parsed: executors.operators(parsed, stream.settings),
            query_settings=None if executors is None else executors.query_settings(spark),
        )
        try:
            watch(
                query,
                stream,
                config,
                lake,
                available_now=available_now,
                stop=stop,
                what=rule.what,
                stop_between_batches=True,
            )
        finally:
            sink.close()
            stream.progress = query.recentProgress
        return stream

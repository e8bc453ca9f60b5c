"""A live stream over the lab's log: its lock, its checkpoint, its query and the loop that watches it.

The three live streams (``lklab.speed_layer``, ``lklab.pipelines.unique_visitors.speed``, ``lklab.pipelines.order_payments.stream``)
differ in what a micro-batch does (their ``process``) and in how lines are parsed; how they run
is this module:

* ``stream_lock``: one process per table prefix and app (``shared.locks.writer``; a second one
  is refused with ``LockHeld``);
* ``checkpoint_for``: ``<lake>/checkpoints/<prefix><app_id>``, refused when it is missing while
  the stream's tables already hold batches (its batch ids would restart at 0 and be skipped as
  already committed);
* ``start_over_log``: the log source (``shared.log_source``) read ``segments_per_batch`` segments
  per micro-batch into ``process``, once to the end (``available_now``) or every
  ``trigger_interval``;
* ``watch``: waits for the query, stops it once ``stop`` is set, appends heartbeats to a quiet
  log while always on (``lklab.heartbeats``), and raises when the query failed.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQuery

from lklab.heartbeats import Heartbeats, HeartbeatStream
from shared.config import LabConfig
from shared.eventlog import EventLog
from shared.locks import writer
from shared.log_source import log_stream_reader
from shared.tables import Tables

__all__ = ["checkpoint_for", "start_over_log", "stream_lock", "watch"]


def stream_lock(lake: Path, prefix: str, app_id: str) -> AbstractContextManager:
    """The lock a live stream holds while it runs (``LockHeld`` when another process has it)."""
    return writer(lake, "stream-" + (prefix + app_id).replace("/", "."))


def checkpoint_for(lake: Path, prefix: str, app_id: str, tables: Tables, progress_table: str, refusal: str) -> Path:
    """The stream's checkpoint; a ``RuntimeError`` saying ``refusal`` (its ``{checkpoint}`` filled
    in) when it is missing while ``progress_table`` (a table written by every batch) exists."""
    checkpoint = lake / "checkpoints" / (prefix + app_id)
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
) -> StreamingQuery:
    """Start the query: log lines (parsed by ``parse(lines, max_clock_skew=...)`` when given,
    raw otherwise) into ``process(frame, batch_id)`` for each micro-batch."""
    lines = (
        log_stream_reader(spark)
        .option("path", str(lake))
        .option("segmentsPerBatch", segments_per_batch)
        .option("maxLineBytes", config.max_line_bytes)
        .load()
    )
    if parse is not None:
        lines = lines.transform(parse, max_clock_skew=config.max_clock_skew)
    stream = lines.writeStream.foreachBatch(process).option("checkpointLocation", str(checkpoint))
    stream = stream.trigger(availableNow=True) if available_now else stream.trigger(processingTime=trigger_interval)
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

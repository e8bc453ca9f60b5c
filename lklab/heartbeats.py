"""Heartbeats: an always-on stream keeps the log's clock moving while no traffic arrives.

The watermark moves on the log's own clock (``shared.clock``): a tick passes only when a line
arrives. When the log goes quiet, the last events never enter the watermark, and whatever waits
for it (a window not yet final, an order whose payment interval has not closed) waits for the
next line. So once the log has not grown for ``interval`` (wall clock), the stream has read all
of it, is between micro-batches and holds such open state, ``Heartbeats.check`` appends a
heartbeat line (``shared.eventlog.heartbeat_line``: no event, a moment of processing time). The
stream reads it like any other line, and so does a replay, which therefore decides the same.
One per quiet spell: none while the last segment is a heartbeat already.
"""

from __future__ import annotations

import functools
import itertools
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from shared.eventlog import EventLog, read_stamp, scan_lines

__all__ = ["HeartbeatStream", "Heartbeats", "marks_busy"]


class HeartbeatStream(Protocol):
    """What a stream tells ``Heartbeats``."""

    busy: threading.Event  # set while a micro-batch is processed (its state is changing)
    last_segment_read: int  # the highest segment number a micro-batch has read

    @property
    def holds_open_state(self) -> bool:
        """The state holds something only a later watermark settles."""


def marks_busy(step: Callable[[Any, Any, int], None]) -> Callable[[Any, Any, int], None]:
    """A stream's ``foreachBatch`` body, with the stream's ``busy`` set while it runs (what
    ``Heartbeats`` and a clean stop wait on)."""

    @functools.wraps(step)
    def process(stream: Any, lines: Any, batch_id: int) -> None:
        stream.busy.set()
        try:
            step(stream, lines, batch_id)
        finally:
            stream.busy.clear()

    return process


class Heartbeats:
    """Appends a heartbeat to ``log`` for ``stream`` after ``interval`` microseconds of quiet
    (0: never); ``check`` is called from the loop that watches the streaming query."""

    def __init__(self, stream: HeartbeatStream, log: EventLog, interval: int) -> None:
        self.stream, self.log, self.interval = stream, log, interval / 1e6
        self.seen, self.since = log.last_segment(), time.monotonic()

    def check(self) -> None:
        if not self.interval:
            return
        last = self.log.last_segment()
        if last != self.seen:
            self.seen, self.since = last, time.monotonic()
            return
        quiet = time.monotonic() - self.since >= self.interval
        if not quiet or last == 0 or self.stream.busy.is_set() or not self.stream.holds_open_state:
            return
        if self.stream.last_segment_read >= last and not _is_heartbeat_segment(self.log.segment_path(last)):
            self.log.append_heartbeat()


def _is_heartbeat_segment(path: Path) -> bool:
    """The segment holds one line, a heartbeat (reading two lines at most, of 1,024 bytes)."""
    with open(path, "rb") as handle:
        read_stamp(handle)
        lines = list(itertools.islice((line for batch in scan_lines(handle, 1024) for line in batch.lines), 2))
    return len(lines) == 1 and b'"heartbeat": true' in lines[0]

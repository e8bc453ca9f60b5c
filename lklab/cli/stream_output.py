"""What ``lklab speed`` shows while it runs: its record per micro-batch, as JSON or text, and progress.

A stream logs one JSON object per micro-batch on its rule's logger (``lklab.live_stream``).
``--log-format json`` prints each as it is, after the time and the logger's name, for a log
shipper (``console.machine_records``); ``--log-format text`` prints it as a sentence
(``batch 12: segments 13..13, lines 52, late 1, ...``). The default is text where stderr is a
terminal and JSON elsewhere (a service's log). ``--quiet`` prints neither: only the command's
last line (where every line went) and its errors.

Inside ``lklab compare`` and ``lklab demo`` the streams run many times over; their records go to
a file next to the report instead (``records_to_file``: ``<report>/streams.log``), and to stderr
as well with ``--verbose``, so the console holds the progress and the summary only.

With ``--available-now`` the stream also shows how far it is: the segments read of the log's last
segment when it started, the rate and the time left (``lklab.progress``: a bar on a terminal,
a line every ten seconds elsewhere).
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Iterator
from pathlib import Path

from lklab.cli.console import machine_records
from lklab.progress import CurrentStderr
from lklab.progress import progress as track

__all__ = ["LOG_FORMATS", "stream_output", "records_to_file", "as_text", "last_segment_of"]

LOG_FORMATS = ("json", "text")
_SHOWN_APART = ("event", "stream", "batch", "seconds")


def last_segment_of(record: dict) -> int | None:
    """The last segment a micro-batch read, as its record names it (``last_segment`` or ``segments``)."""
    if record.get("last_segment") is not None:
        return int(record["last_segment"])
    segments = record.get("segments")
    return int(segments[-1]) if segments and segments[-1] is not None else None


def as_text(record: dict) -> str:
    """A micro-batch's record as a sentence: ``<stream> batch N (S s): segments A..B, lines L, ...``."""
    first, last = record.get("first_segment"), last_segment_of(record)
    segments = record.get("segments") or [first, last]
    parts = [f"segments {segments[0]}..{segments[-1]}"] if segments[0] is not None else ["no segment"]
    for key, value in record.items():
        if key in (*_SHOWN_APART, "segments", "first_segment", "last_segment"):
            continue
        shown = f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) else value
        parts.append(f"{key.replace('_', ' ')} {shown}")
    return f"{record.get('stream', '')} batch {record.get('batch')} ({record.get('seconds')} s): {', '.join(parts)}"


class _TextRecords(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        try:
            fields = json.loads(record.getMessage())
        except ValueError:
            return super().format(record)
        if not isinstance(fields, dict) or fields.get("event") != "micro-batch":
            return super().format(record)
        shown = logging.makeLogRecord(record.__dict__)  # the record itself goes on to the other handlers
        shown.msg, shown.args = as_text(fields), ()
        return super().format(shown)


class _Progressing(logging.Handler):
    """Advances ``tracked`` to the last segment each micro-batch record names."""

    def __init__(self, tracked) -> None:
        super().__init__()
        self.tracked = tracked

    def emit(self, record: logging.LogRecord) -> None:
        try:
            last = last_segment_of(json.loads(record.getMessage()))
        except (ValueError, TypeError, AttributeError):
            return
        if last is not None and last > self.tracked.done:
            self.tracked.advance(min(last, self.tracked.total or last) - self.tracked.done)


def _records(name: str, log_format: str, quiet: bool) -> None:
    records = logging.getLogger(name)
    records.handlers[:] = [
        h for h in records.handlers if not (getattr(h, "_lklab_records", False) or getattr(h, "_lklab_machine", False))
    ]
    records.setLevel(logging.INFO)
    records.propagate = False
    if quiet:
        return
    if log_format == "json":
        machine_records(name)
        return
    handler = CurrentStderr()
    handler.setFormatter(_TextRecords("[%(asctime)s] %(message)s", datefmt="%H:%M:%S"))
    handler._lklab_records = True
    records.addHandler(handler)


@contextlib.contextmanager
def stream_output(name: str, log_format: str, quiet: bool, segments: int | None) -> Iterator[None]:
    """Show the records of logger ``name`` as ``log_format`` (none when ``quiet``) while the block
    runs; with ``segments`` (the log's last segment, for a stream that stops at the end), track
    the segments read of it."""
    _records(name, log_format, quiet)
    if not segments:
        yield
        return
    with track("segments read", segments) as tracked:
        handler = _Progressing(tracked)
        logging.getLogger(name).addHandler(handler)
        try:
            yield
        finally:
            logging.getLogger(name).removeHandler(handler)


@contextlib.contextmanager
def records_to_file(name: str, path: str | Path, verbose: bool = False) -> Iterator[Path]:
    """Write the records of logger ``name`` (and its children) to ``path`` as
    ``<time> <name> <record>`` lines while the block runs, appending; with ``verbose`` print them
    on stderr too (``machine_records``' format). The logger's handlers and propagation are put
    back afterwards, so a command run later in the process logs as before."""
    records = logging.getLogger(name)
    saved = (list(records.handlers), records.propagate, records.level)
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    to_file = logging.FileHandler(target, encoding="utf-8")
    to_file.setFormatter(logging.Formatter("%(asctime)s %(name)s %(message)s"))
    records.handlers[:] = [to_file]
    records.setLevel(logging.INFO)
    records.propagate = False
    if verbose:
        machine_records(name)
    try:
        yield target
    finally:
        to_file.close()
        records.handlers[:], records.propagate = saved[0], saved[1]
        records.setLevel(saved[2])

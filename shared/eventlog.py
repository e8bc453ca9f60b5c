"""The durable, append-only event log under ``<lake>/log/``.

The log is a sequence of *segments* ``segment-000000000001.jsonl``, ``...002`` and so on, each
holding JSON lines. A segment is written to a hidden temporary file, flushed to disk, and then
hard-linked to its final name: the link either appears complete or not at all, so no reader sees
half a segment, and two writers can never take the same number (the link fails, the loser takes
the next). Segments are never changed after that.

Segment order is processing-time order: every reader takes segment N before N+1. A gap in the
numbering means the log was damaged, and reading refuses to go past it.

Lines are stored verbatim, bad ones included (they are the dead-letter path's input). The one
exception is stamping: a line that is a JSON object without ``ingest_time`` gets
``"ingest_time": "<append time>"`` added before its closing brace.
"""

from __future__ import annotations

import json
import os
import re
import uuid
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterable

__all__ = ["EventLog", "Segment", "LogDamaged", "stamp_ingest_time", "format_timestamp", "heartbeat_line"]

_NAME = re.compile(r"^segment-(\d{12})\.jsonl$")


class LogDamaged(RuntimeError):
    """The log's segment numbering has a gap or a segment cannot be read."""


@dataclass(frozen=True)
class Segment:
    number: int
    path: Path

    @property
    def size_bytes(self) -> int:
        return self.path.stat().st_size


def format_timestamp(moment: datetime) -> str:
    """ISO-8601 in UTC with microseconds and ``Z``: the log's timestamp format."""
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def heartbeat_line(moment: datetime) -> str:
    """A heartbeat: no event, only a moment of processing time (see ``shared.events``)."""
    return json.dumps({"heartbeat": True, "ingest_time": format_timestamp(moment)})


def stamp_ingest_time(line: bytes, ingest_time: str) -> bytes:
    """Add ``ingest_time`` to a JSON-object line that lacks it; return other lines unchanged."""
    try:
        value = json.loads(line)
    except (ValueError, UnicodeDecodeError):
        return line
    if not isinstance(value, dict) or "ingest_time" in value:
        return line
    body = line.rstrip()
    if not body.endswith(b"}"):
        return line
    separator = b", " if value else b""
    return body[:-1].rstrip() + separator + b'"ingest_time": "' + ingest_time.encode() + b'"}'


class EventLog:
    """Append and list the segments of the log at ``<lake>/log``."""

    def __init__(self, lake: str | Path) -> None:
        self.lake = Path(lake)
        self.root = self.lake / "log"

    def segments(self) -> list[Segment]:
        """All segments in sequence order; raises ``LogDamaged`` on a gap."""
        if not self.root.is_dir():
            return []
        found = sorted(
            (int(m.group(1)), self.root / name)
            for name in os.listdir(self.root)
            if (m := _NAME.match(name))
        )
        for expected, (number, _) in enumerate(found, start=1):
            if number != expected:
                raise LogDamaged(f"log {self.root}: segment {expected} is missing (next is {number})")
        return [Segment(number, path) for number, path in found]

    def last_segment(self) -> int:
        """Number of the newest segment, 0 for an empty log."""
        segments = self.segments()
        return segments[-1].number if segments else 0

    def segment_path(self, number: int) -> Path:
        return self.root / f"segment-{number:012d}.jsonl"

    def append(
        self, lines: Iterable[bytes | str], ingest_time: datetime | None = None, *, stamp: bool = True
    ) -> Segment:
        """Write ``lines`` as the next segment, atomically.

        With ``stamp`` (the default), JSON-object lines lacking ``ingest_time`` get one; a writer
        that sets ``ingest_time`` on every line itself passes ``stamp=False``.
        """
        now = format_timestamp(ingest_time or datetime.now(timezone.utc))
        self.root.mkdir(parents=True, exist_ok=True)
        temporary = self.root / f".incoming-{uuid.uuid4().hex}.tmp"
        try:
            with temporary.open("wb") as handle:
                for line in lines:
                    data = line.encode() if isinstance(line, str) else line
                    data = data.rstrip(b"\r\n")
                    handle.write((stamp_ingest_time(data, now) if stamp else data) + b"\n")
                handle.flush()
                os.fsync(handle.fileno())
            return self._publish(temporary)
        finally:
            temporary.unlink(missing_ok=True)

    def append_heartbeat(self, moment: datetime | None = None) -> Segment:
        """Append a segment holding one heartbeat at ``moment`` (default: now), so that the
        log's clock moves on while no traffic arrives."""
        return self.append([heartbeat_line(moment or datetime.now(timezone.utc))], stamp=False)

    def append_file(self, path: str | Path, ingest_time: datetime | None = None) -> Segment:
        """Append the JSON lines of ``path`` as one segment (bad lines included, verbatim)."""
        with Path(path).open("rb") as handle:
            return self.append(handle.read().splitlines(), ingest_time)

    def _publish(self, temporary: Path) -> Segment:
        number = self.last_segment() + 1
        while True:
            target = self.segment_path(number)
            try:
                os.link(temporary, target)
            except FileExistsError:
                number += 1
                continue
            directory = os.open(self.root, os.O_RDONLY)
            try:
                os.fsync(directory)
            finally:
                os.close(directory)
            return Segment(number, target)

    @staticmethod
    def read_lines(segment_path: str | Path) -> list[str]:
        """The lines of one segment. Bytes that are not UTF-8 are kept as ``\\xNN`` escapes."""
        with open(segment_path, "rb") as handle:
            data = handle.read()
        lines = data.decode("utf-8", "backslashreplace").split("\n")
        return lines[:-1] if lines[-1] == "" else lines

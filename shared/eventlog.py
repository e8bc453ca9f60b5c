"""The durable, append-only event log under ``<lake>/log/``.

The log is a sequence of *segments* ``segment-000000000001.jsonl``, ``...002`` and so on, each
holding JSON lines. A segment is written to a hidden temporary file, flushed to disk, and then
hard-linked to its final name: the link either appears complete or not at all, so no reader sees
half a segment, and two writers can never take the same number (the link fails, the loser takes
the next). Segments are never changed after that.

Segment order is processing-time order: every reader takes segment N before N+1. A gap in the
numbering means the log was damaged, and reading refuses to go past it. Writers in separate
processes may append at once: each takes the number after the highest it sees and the next one
when that is taken, so a number is only ever taken once the one before it exists.

Lines are stored verbatim, bad ones included (they are the dead-letter path's input): a
segment holds the bytes its writer was given, each line ended by ``\\n``.

The stamp. Most writers send lines without an ingest time, and the log gives each such line
the moment it was appended. That moment is the segment's, not the line's: an append that stamps
(``EventLog.append``, ``lklab ingest``) opens its segment with one header line,
``#lklab-segment appended_at=<append time>`` (``SEGMENT_HEADER``, the time as
``format_timestamp`` writes it), written in the same file, so the segment is published with its
stamp or not at all. The header is not a line of the segment: readers take the stamp from it
(``read_stamp``) and give it to every line as ``appended_at``, and a parser takes a line's
ingest time from its own ``ingest_time`` field, or from ``appended_at`` where it has none
(``shared.line_checks``). A segment whose writer sets ``ingest_time`` on every line itself
(the generators, heartbeats: ``stamp=False``) has no header; its ``appended_at`` is null.
Segments written before the header existed have none either: their lines carry the stamp
inside (``, "ingest_time": "..."`` added before the closing brace), and parse as they did.

A line is the bytes before a ``\\n`` (a ``\\r`` stays part of it). Readers take them as stored,
with two exceptions, both in ``scan_lines``: a UTF-8 byte order mark opening a segment (after
its header) marks its encoding and is not part of its first line, and a line longer than
``max-line-bytes`` is never held whole: only its first ``LINE_PREFIX_BYTES`` and its length are
kept (it becomes a ``line_too_long`` dead letter).
"""

from __future__ import annotations

import json
import os
import re
import sys
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import BinaryIO, NamedTuple

__all__ = [
    "written_log",
    "EventLog",
    "Segment",
    "LogDamaged",
    "EmptyInput",
    "LineBatch",
    "scan_lines",
    "holds_no_line",
    "read_stamp",
    "segment_header",
    "SEGMENT_HEADER",
    "HEADER_BYTES",
    "HEADER_PATTERN",
    "format_timestamp",
    "heartbeat_line",
    "BOM",
    "LINE_PREFIX_BYTES",
]

_NAME = re.compile(r"^segment-(\d{12})\.jsonl$")
BOM = b"\xef\xbb\xbf"  # the UTF-8 byte order mark
LINE_PREFIX_BYTES = 1024  # what is kept of a line longer than max-line-bytes (at most max-line-bytes)
_CHUNK_BYTES = 1 << 20
SEGMENT_HEADER = b"#lklab-segment appended_at="  # then the append time and "\\n"
_STAMP = r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{6}Z"  # as format_timestamp writes it
HEADER_PATTERN = f"^{SEGMENT_HEADER.decode()}{_STAMP}$"  # the header without its "\n" (Python and Java)
HEADER_BYTES = len(SEGMENT_HEADER) + len("2026-01-05T10:00:00.000000Z") + 1
_HEADER = re.compile(SEGMENT_HEADER + b"(" + _STAMP.encode() + b")\n")


class LogDamaged(RuntimeError):
    """The log's segment numbering has a gap or a segment cannot be read."""


class EmptyInput(ValueError):
    """A file to append holds no line at all."""


class LineBatch(NamedTuple):
    """Consecutive lines of a segment: each as kept (``scan_lines``) and its length in bytes."""

    lines: list[bytes]
    lengths: list[int]


class _Carried:
    """The line a chunk ended in, while the next chunks complete it: whole while it is at most
    ``limit`` bytes long, then only its first ``keep`` bytes (and its length)."""

    def __init__(self, limit: int, keep: int) -> None:
        self.limit, self.keep = limit, keep
        self.parts: list[bytes] = []
        self.length = 0
        self.cut = False

    def add(self, piece: bytes) -> None:
        self.length += len(piece)
        if self.length <= self.limit:
            self.parts.append(piece)
        elif not self.cut:
            self.parts = [(b"".join(self.parts) + piece[: self.keep])[: self.keep]]
            self.cut = True

    def take(self) -> tuple[bytes, int]:
        line = (b"".join(self.parts), self.length)
        self.parts, self.length, self.cut = [], 0, False
        return line


def holds_no_line(path: str | Path) -> bool:
    """The file has no line to append: no bytes at all, or only a byte order mark."""
    with open(path, "rb") as handle:
        return handle.read(len(BOM) + 1) in (b"", BOM)


def scan_lines(handle: BinaryIO, max_line_bytes: int | None = None) -> Iterator[LineBatch]:
    """The lines of a segment (a binary file), read a chunk at a time.

    Lines are split on ``\\n`` only; a last line without one is a line, an empty end is none.
    A UTF-8 byte order mark opening the segment is dropped. A line longer than
    ``max_line_bytes`` (None: no limit) is kept as its first ``min(LINE_PREFIX_BYTES,
    max_line_bytes)`` bytes, so a kept line is shorter than its length exactly when it was cut.
    Nothing is decoded: bytes that are not UTF-8 stay as they are. Memory is one chunk (1 MiB)
    plus ``max_line_bytes``, whatever the size of the segment or of its longest line.
    """
    limit = sys.maxsize if max_line_bytes is None else max_line_bytes
    keep = min(LINE_PREFIX_BYTES, limit)
    carried = _Carried(limit, keep)
    chunk = handle.read(_CHUNK_BYTES)
    if chunk.startswith(BOM):
        chunk = chunk[len(BOM) :]
    while chunk:
        pieces = chunk.split(b"\n")
        carried.add(pieces[0])
        if len(pieces) > 1:
            first, first_length = carried.take()
            middle = pieces[1:-1]
            lengths = [first_length, *map(len, middle)]
            if max(lengths) > limit:
                middle = [piece if len(piece) <= limit else piece[:keep] for piece in middle]
            yield LineBatch([first, *middle], lengths)
            carried.add(pieces[-1])
        chunk = handle.read(_CHUNK_BYTES)
    if carried.length:
        line, length = carried.take()
        yield LineBatch([line], [length])


@dataclass(frozen=True)
class Segment:
    number: int
    path: Path

    @property
    def size_bytes(self) -> int:
        return self.path.stat().st_size


def format_timestamp(moment: datetime) -> str:
    """ISO-8601 in UTC with microseconds and ``Z``: the log's timestamp format."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def heartbeat_line(moment: datetime) -> str:
    """A heartbeat: no event, only a moment of processing time (see ``shared.events``)."""
    return json.dumps({"heartbeat": True, "ingest_time": format_timestamp(moment)})


def segment_header(stamp: str) -> bytes:
    """The header line a stamping append opens its segment with (``stamp``: ``format_timestamp``'s)."""
    header = SEGMENT_HEADER + stamp.encode() + b"\n"
    if not _HEADER.fullmatch(header):
        raise ValueError(
            f"segment stamp {stamp!r}: not a time as format_timestamp writes it (2026-01-05T10:00:00.000000Z)"
        )
    return header


def read_stamp(handle: BinaryIO) -> str | None:
    """The stamp of the segment open in ``handle`` (at its start), None when it has no header;
    ``handle`` is left at its first line (after the header, or where it was)."""
    opening = handle.read(HEADER_BYTES)
    found = _HEADER.fullmatch(opening)
    if found is None:
        handle.seek(-len(opening), os.SEEK_CUR)
        return None
    return found.group(1).decode()


class EventLog:
    """Append and list the segments of the log at ``<lake>/log``."""

    def __init__(self, lake: str | Path) -> None:
        self.lake = Path(lake)
        self.root = self.lake / "log"

    def segments(self) -> list[Segment]:
        """All segments in sequence order; raises ``LogDamaged`` on a gap.

        A listing taken while writers publish may miss a segment linked during it (and show a
        later one): a gap is only damage when the missing segment is still absent afterwards.
        """
        while True:
            found = self._listed()
            missing = next(
                (expected for expected, (number, _) in enumerate(found, start=1) if number != expected), None
            )
            if missing is None:
                return [Segment(number, path) for number, path in found]
            if not self.segment_path(missing).exists():
                following = next(number for number, _ in found if number > missing)
                raise LogDamaged(f"log {self.root}: segment {missing} is missing (next is {following})")

    def _listed(self) -> list[tuple[int, Path]]:
        if not self.root.is_dir():
            return []
        return sorted((int(m.group(1)), self.root / name) for name in os.listdir(self.root) if (m := _NAME.match(name)))

    def size_bytes(self) -> int:
        """The bytes of the segments listed now (0 for no log).

        A segment that goes while it is listed is left out: the figure is an estimate of the
        log's size, not a check of it (``segments`` says whether the log is whole).
        """
        total = 0
        for _, path in self._listed():
            try:
                total += path.stat().st_size
            except FileNotFoundError:
                continue
        return total

    def last_segment(self) -> int:
        """Number of the newest segment, 0 for an empty log."""
        segments = self.segments()
        return segments[-1].number if segments else 0

    def segment_path(self, number: int) -> Path:
        return self.root / f"segment-{number:012d}.jsonl"

    def append(
        self, lines: Iterable[bytes | str], ingest_time: datetime | None = None, *, stamp: bool = True
    ) -> Segment:
        """Write ``lines`` (verbatim, a final ``\\r`` or ``\\n`` of each dropped) as the next
        segment, atomically.

        With ``stamp`` (the default), the segment opens with its header, the stamp ``ingest_time``
        (default: now) that a line without its own ``ingest_time`` is read with; a writer that sets
        ``ingest_time`` on every line itself passes ``stamp=False``.
        """
        self.root.mkdir(parents=True, exist_ok=True)
        temporary = self.root / f".incoming-{uuid.uuid4().hex}.tmp"
        try:
            with temporary.open("wb") as handle:
                if stamp:
                    handle.write(segment_header(format_timestamp(ingest_time or datetime.now(UTC))))
                for line in lines:
                    data = line.encode() if isinstance(line, str) else line
                    handle.write(data.rstrip(b"\r\n") + b"\n")
                handle.flush()
                os.fsync(handle.fileno())
            return self._publish(temporary)
        finally:
            temporary.unlink(missing_ok=True)

    def append_heartbeat(self, moment: datetime | None = None) -> Segment:
        """Append a segment holding one heartbeat at ``moment`` (default: now), so that the
        log's clock moves on while no traffic arrives."""
        return self.append([heartbeat_line(moment or datetime.now(UTC))], stamp=False)

    def append_file(self, path: str | Path, ingest_time: datetime | None = None) -> Segment:
        """Append the JSON lines of ``path`` as one segment (bad lines included, verbatim),
        reading it a line at a time. Lines end at ``\\n``, ``\\r\\n`` or a lone ``\\r``.

        A UTF-8 byte order mark opening the file marks its encoding: it is not part of the first
        line, which is appended as it would be without it. A file with no line at
        all (no bytes, or only the mark) raises ``EmptyInput`` and appends nothing: an empty
        segment would be a batch of nothing, and an empty file is more often a failed export than
        a quiet minute.
        """
        if holds_no_line(path):
            raise EmptyInput(f"{path} is empty: there is no line to append")
        with Path(path).open("rb") as handle:
            if handle.read(len(BOM)) != BOM:
                handle.seek(0)
            return self.append((line for piece in handle for line in piece.splitlines()), ingest_time)

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

    def published_at(self, number: int) -> float | None:
        """When segment ``number`` was published, in Unix seconds: its file's change time, set
        as it is linked under its final name (and as its temporary name is removed, right
        after). None: no such segment on disk. A copied log has its copy's times."""
        try:
            return self.segment_path(number).stat().st_ctime
        except FileNotFoundError:
            return None

    def stamp(self, number: int) -> str | None:
        """Segment ``number``'s stamp (its lines' ``appended_at``), None when it has none."""
        with self.segment_path(number).open("rb") as handle:
            return read_stamp(handle)

    @staticmethod
    def read_lines(segment_path: str | Path) -> list[str]:
        """The lines of one small segment as text, for a look at it: whole (its header is not a
        line), split as ``scan_lines`` splits them, bytes that are not UTF-8 shown as ``\\xNN``
        escapes (the readers behind ``parse_events`` keep them as they are)."""
        with open(segment_path, "rb") as handle:
            read_stamp(handle)
            return [line.decode("utf-8", "backslashreplace") for batch in scan_lines(handle) for line in batch.lines]


def written_log(lake: str | Path, hint: str) -> tuple[str, int]:
    """The lake's resolved path and its log's last segment, for a command that reads the whole
    log; ``ValueError`` naming ``hint`` (what writes one) when the log is empty."""
    resolved = str(Path(lake).resolve())
    last = EventLog(resolved).last_segment()
    if last == 0:
        raise ValueError(f"the log under {resolved} is empty: {hint}")
    return resolved, last

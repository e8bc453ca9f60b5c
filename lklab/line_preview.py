"""What a pipeline will make of a file's lines, told before they are appended to the log.

``lklab ingest`` appends every line as it is (the log is the record), but a file in the wrong
shape — a CSV export, JSON lines with other field names — would otherwise show up only after a
Spark run, every line a dead letter. ``preview_file`` reads a file the way the log will hold it
(a byte order mark opening it dropped, lines split as ``EventLog.append_file`` splits them and
kept as sent, cut at ``max-line-bytes`` as the log's readers cut them, each with the stamp the
append will give its segment as ``appended_at``: the ingest time of a line without its own) and runs the pipeline's ``LineFormat.check`` over it, a chunk at a time,
in this process: no Spark. The result (``FilePreview``) counts the lines that look like events,
the heartbeats, and the dead letters by reason, each reason with its first line as an example.

A ``LineFormat`` whose check is the pipeline's own parser (``exact``) predicts every dead letter
and its reason as the pipeline will write it. The others (``fields_only``) run the checks every
line gets (``shared.line_checks``: bytes, JSON, an object), then the required fields and the
event time: every line they refuse will be a dead letter, with the first reason they find; a line
they pass may still be refused by the pipeline's own value checks (a currency code, a sign).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import pyarrow as pa

from lklab.pipelines.contract import LineFormat
from shared.config import LabConfig
from shared.eventlog import BOM, LINE_PREFIX_BYTES
from shared.line_checks import dead_letter_row, event_clock, read_event_line
from shared.line_rows import parsed_table

__all__ = ["FilePreview", "Example", "fields_only", "preview_file", "render_preview", "MOSTLY_DEAD"]

_CHUNK = 50_000  # lines checked at once
_SHOWN_BYTES = 160  # of an example line
MOSTLY_DEAD = 0.5  # a file more than half of whose lines will be dead letters is called out
_SCHEMA = pa.schema(
    [
        pa.field("segment", pa.int64()),
        pa.field("line_number", pa.int64()),
        pa.field("raw_line", pa.string()),
        pa.field("reject_reason", pa.string()),
        pa.field("reject_detail", pa.string()),
        pa.field("heartbeat", pa.bool_()),
    ]
)


def _fields_only_line(
    required: tuple[str, ...], event_time: str, max_clock_skew: int, line: bytes, length, appended_at=None
) -> dict:
    value, ingest_time, settled = read_event_line(line, length, appended_at)
    if settled is not None:
        return settled
    missing = [name for name in required if value.get(name) is None or value.get(name) == ""]
    if missing:
        return dead_letter_row("missing_field", ", ".join(missing))
    if not isinstance(value[event_time], str):
        return dead_letter_row("wrong_type", event_time)
    _, rejection = event_clock(value[event_time], value.get("ingest_time"), ingest_time, max_clock_skew)
    if rejection is not None:
        return dead_letter_row(*rejection)
    return {"reject_reason": None}


def _check_fields(required: tuple[str, ...], event_time: str, raw: pa.Table, config: LabConfig) -> pa.Table:
    check = partial(_fields_only_line, required, event_time, config.max_clock_skew)
    return parsed_table(raw, check, _SCHEMA)


def fields_only(required: tuple[str, ...], event_time: str = "event_time") -> LineFormat:
    """A ``LineFormat`` checking the lines every pipeline checks, then that each of ``required``
    is there (every one missing named, not only the first) and that ``event_time`` is a time
    (ISO-8601 with a zone, not ahead of the ingest time by more than ``max-clock-skew``)."""
    return LineFormat(fields=required, check=partial(_check_fields, required, event_time), exact=False)


@dataclass(frozen=True)
class Example:
    """The first line a reason refused: its number in the file, the line as the file has it (as
    text, a byte that is not UTF-8 as ``\\xNN``, cut at ``_SHOWN_BYTES`` characters), the detail."""

    line_number: int
    text: str
    detail: str | None


@dataclass
class FilePreview:
    """What the pipeline will make of one file's lines (the module docstring)."""

    path: str
    lines: int = 0
    events: int = 0
    heartbeats: int = 0
    dead: dict[str, int] = field(default_factory=dict)
    examples: dict[str, Example] = field(default_factory=dict)

    @property
    def dead_letters(self) -> int:
        return sum(self.dead.values())

    @property
    def mostly_dead(self) -> bool:
        return self.lines > 0 and self.dead_letters > MOSTLY_DEAD * self.lines


def _lines(path: Path, max_line_bytes: int, read: list[int]) -> Iterator[tuple[bytes, int, bytes]]:
    """The file's lines as the log will hold them: (the bytes its readers keep, the line's
    length, the line as the file has it); ``read[0]``: the file's bytes read so far."""
    keep = min(LINE_PREFIX_BYTES, max_line_bytes)
    with path.open("rb") as handle:
        if handle.read(len(BOM)) != BOM:
            handle.seek(0)
        for piece in handle:
            read[0] = handle.tell()
            for line in piece.splitlines():
                held = line.rstrip(b"\r\n")
                yield (held if len(held) <= max_line_bytes else held[:keep]), len(held), line


def _chunks(lines: Iterator[tuple[bytes, int, bytes]], stamp: str) -> Iterator[tuple[pa.Table, list[bytes]]]:
    """The lines a chunk at a time: as the log's readers give them, and as the file has them."""
    chunk: list[tuple[bytes, int, bytes]] = []
    number = 0
    for line in lines:
        chunk.append(line)
        if len(chunk) == _CHUNK:
            yield _raw(chunk, number, stamp), [sent for _, _, sent in chunk]
            number += len(chunk)
            chunk = []
    if chunk:
        yield _raw(chunk, number, stamp), [sent for _, _, sent in chunk]


def _raw(chunk: list[tuple[bytes, int, bytes]], before: int, stamp: str) -> pa.Table:
    return pa.table(
        {
            "segment": pa.array([0] * len(chunk), pa.int64()),
            "line_number": pa.array(range(before + 1, before + len(chunk) + 1), pa.int64()),
            "raw_line": pa.array([line for line, _, _ in chunk], pa.binary()).cast(pa.string(), safe=False),
            "line_bytes": pa.array([length for _, length, _ in chunk], pa.int64()),
            "appended_at": pa.repeat(pa.scalar(stamp, pa.string()), len(chunk)),
        }
    )


def _shown(text: str) -> str:
    return text if len(text) <= _SHOWN_BYTES else text[: _SHOWN_BYTES - 1] + "…"


def preview_file(
    path: str | Path,
    line_format: LineFormat,
    config: LabConfig,
    stamp: str,
    progress: Callable[[int], None] = lambda read: None,
) -> FilePreview:
    """Check ``path``'s lines, appended with ``stamp`` (the ingest time the append gives its
    segment, as ``shared.eventlog.format_timestamp`` writes it), by ``line_format``;
    ``progress(bytes read)`` after each chunk."""
    preview, read = FilePreview(str(path)), [0]
    for raw, sent in _chunks(_lines(Path(path), config.max_line_bytes, read), stamp):
        checked = line_format.check(raw, config)
        reasons = checked["reject_reason"].to_pylist()
        heartbeats = checked["heartbeat"].to_pylist()
        for i, reason in enumerate(reasons):
            if reason is None:
                preview.heartbeats += bool(heartbeats[i])
                continue
            preview.dead[reason] = preview.dead.get(reason, 0) + 1
            if reason not in preview.examples:
                detail = checked["reject_detail"][i].as_py()
                text = sent[i].decode("utf-8", "backslashreplace")
                preview.examples[reason] = Example(preview.lines + i + 1, _shown(text), detail)
        preview.lines += checked.num_rows
        progress(read[0])
    preview.events = preview.lines - preview.heartbeats - preview.dead_letters
    return preview


def render_preview(preview: FilePreview, pipeline: str, line_format: LineFormat) -> list[str]:
    """The lines ``lklab ingest`` prints of a file's preview (its appended segment said before them)."""
    looks = "are" if line_format.exact else "look like"
    beats = f", {preview.heartbeats:,} heartbeats" if preview.heartbeats else ""
    lines = [
        f"  {preview.lines:,} lines: {preview.events:,} {looks} {pipeline} events{beats}, "
        f"{preview.dead_letters:,} will be dead letters"
        + (
            ""
            if line_format.exact or not preview.events
            else " (their values are checked when the pipeline reads them)"
        )
    ]
    for reason, count in sorted(preview.dead.items(), key=lambda item: (-item[1], item[0])):
        example = preview.examples[reason]
        detail = f" ({example.detail})" if example.detail else ""
        lines.append(f"    {reason}{detail}: {count:,}, first line {example.line_number:,}: {example.text}")
    if preview.dead:
        lines.append(f"    expected: a JSON object per line with {', '.join(line_format.fields)}")
    return lines

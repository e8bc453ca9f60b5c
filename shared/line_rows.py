"""The Arrow columns every pipeline's rows of log lines share, declared once.

A row that came from a line of the log says where the line stands (``LINE_POSITION``:
``segment``, ``line_number``). An event's row (``event_schema``) adds the event's id, the
payload its line format defines and its clock (``EVENT_CLOCK``: ``event_time`` and
``ingest_time``, UTC microseconds). A parsed line's row (``parsed_schema``) adds what parsing
made of the line (``RAW_LINE`` and ``PARSE_OUTCOME``: ``reject_reason``, ``reject_detail``,
``heartbeat``). So a pipeline's line format names only its payload; the rest is the same for
billing (``shared.events``) and every pipeline under ``lklab.pipelines``. A parser written in
Python gives each line's fields as a dict; ``parsed_table`` makes its Arrow table.
"""

from __future__ import annotations

from collections.abc import Callable

import pyarrow as pa
import pyarrow.compute as pc

__all__ = [
    "UTC_MICROS",
    "HEARTBEAT_FIELD",
    "LINE_POSITION",
    "RAW_LINE",
    "EVENT_ID",
    "EVENT_CLOCK",
    "PARSE_OUTCOME",
    "event_schema",
    "parsed_schema",
    "parsed_table",
]

UTC_MICROS = pa.timestamp("us", tz="UTC")  # Spark's TimestampType in Arrow
HEARTBEAT_FIELD = "heartbeat"

LINE_POSITION = (pa.field("segment", pa.int64()), pa.field("line_number", pa.int64()))
RAW_LINE = pa.field("raw_line", pa.string())
EVENT_ID = pa.field("event_id", pa.string())
EVENT_CLOCK = (pa.field("event_time", UTC_MICROS), pa.field("ingest_time", UTC_MICROS))
PARSE_OUTCOME = (
    pa.field("reject_reason", pa.string()),
    pa.field("reject_detail", pa.string()),
    pa.field(HEARTBEAT_FIELD, pa.bool_()),
)


def event_schema(*payload: pa.Field) -> pa.Schema:
    """An event's row: its line's position, ``event_id``, ``payload`` (the line format's own
    fields, in order), then its clock."""
    return pa.schema([*LINE_POSITION, EVENT_ID, *payload, *EVENT_CLOCK])


def parsed_schema(events: pa.Schema) -> pa.Schema:
    """A parsed line's row: the columns of ``events`` (null for a dead letter or a heartbeat),
    then the line as read and what parsing made of it."""
    return pa.schema([*events, RAW_LINE, *PARSE_OUTCOME])


def parsed_table(raw: pa.Table, parse: Callable[[bytes, int | None, str | None], dict], schema: pa.Schema) -> pa.Table:
    """``schema`` rows for raw log lines (``segment``, ``line_number``, ``raw_line`` and, as the
    log's readers give them, ``line_bytes`` and ``appended_at``), one per line, in the order given.

    ``parse`` takes a line's bytes (``raw_line`` may hold bytes that are not UTF-8, as a Spark
    string can: they are never decoded in Arrow), the whole line's length (None: the line is
    whole) and its segment's stamp (None: none; ``shared.line_checks`` reads the line's ingest
    time from it where the line has no ``ingest_time``), and gives the line's fields by name (times in microseconds), a dead letter's with
    its ``raw_text`` (``shared.line_checks.dead_letter_row``): that text replaces the line's
    ``raw_line`` where there is one. A field ``parse`` leaves out is null; ``heartbeat`` false."""
    lines = raw["raw_line"].cast(pa.binary()).to_pylist()
    lengths = raw["line_bytes"].to_pylist() if "line_bytes" in raw.column_names else [None] * raw.num_rows
    stamps = raw["appended_at"].to_pylist() if "appended_at" in raw.column_names else [None] * raw.num_rows
    # Arrow reads the dicts into a struct, field by field in C++: no Python list per column
    rows = pa.array(
        [parse(line, length, stamp) for line, length, stamp in zip(lines, lengths, stamps)], _row_type(schema)
    )
    texts = rows.field(_RAW_TEXT.name)  # a line that is not text as it stands
    columns = {
        "segment": raw["segment"],
        "line_number": raw["line_number"],
        "raw_line": pc.coalesce(texts, raw["raw_line"]) if texts.null_count < len(texts) else raw["raw_line"],
    }
    for field in schema:
        if field.name not in columns:
            column = rows.field(field.name)
            columns[field.name] = pc.fill_null(column, False) if field.name == HEARTBEAT_FIELD else column
    return pa.table(columns).select(schema.names).cast(schema)


_FROM_RAW = frozenset(("segment", "line_number", "raw_line"))
_RAW_TEXT = pa.field("raw_text", pa.string())


def _row_type(schema: pa.Schema) -> pa.StructType:
    """The struct a parser's dicts are read into: ``schema``'s fields that do not come from the
    raw line (times as int64 microseconds), and ``raw_text``."""
    fields = [
        pa.field(f.name, pa.int64() if f.type == UTC_MICROS else f.type) for f in schema if f.name not in _FROM_RAW
    ]
    return pa.struct([*fields, _RAW_TEXT])

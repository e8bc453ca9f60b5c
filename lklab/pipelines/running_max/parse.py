"""Readings: the ``running_max`` pipeline's log lines, parsed and validated in Arrow.

A reading is one JSON object::

    {"event_id": "r-1", "event_time": "2026-01-05T10:00:00Z", "key": "sensor-a", "value": 17}

``event_id``, ``key`` (non-empty strings), ``value`` (a whole number, JSON integer) and
``event_time`` (ISO-8601 with ``Z`` or an offset) are required; ``ingest_time`` is stamped by
``lklab ingest``. A line fails the checks every line gets (``shared.line_checks``: bytes, JSON,
clock) or one of its own, in this order: ``missing_field`` (absent, null or blank), ``wrong_type``
(not a string; ``value`` not an integer), ``invalid_event_time``, ``invalid_ingest_time``,
``event_time_in_future``. A heartbeat (``{"heartbeat": true, "ingest_time": ...}``) carries no
reading. Nothing is dropped: every line comes out as a row, a reading or a rejection.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from shared.events import HEARTBEAT_FIELD, UTC_MICROS
from shared.line_checks import event_clock, iso_micros, read_line, require_skew

__all__ = ["PARSED_SCHEMA", "parse_readings", "parse_reading"]

_TEXT_FIELDS = ("event_id", "key")
PARSED_SCHEMA = pa.schema(
    [
        pa.field("segment", pa.int64()),
        pa.field("line_number", pa.int64()),
        pa.field("raw_line", pa.string()),
        pa.field("event_id", pa.string()),
        pa.field("key", pa.string()),
        pa.field("value", pa.int64()),
        pa.field("event_time", UTC_MICROS),
        pa.field("ingest_time", UTC_MICROS),
        pa.field("reject_reason", pa.string()),
        pa.field("reject_detail", pa.string()),
        pa.field(HEARTBEAT_FIELD, pa.bool_()),
    ]
)


def _rejected(reason: str, detail: str | None, text: str | None = None) -> dict:
    return {"reject_reason": reason, "reject_detail": detail, "raw_text": text, HEARTBEAT_FIELD: False}


def parse_reading(line: bytes, line_bytes: int | None, max_clock_skew: int) -> dict:
    """One line's fields (times in microseconds) or its ``reject_reason`` and ``reject_detail``."""
    value, rejection, text = read_line(line, line_bytes)
    if rejection is not None:
        return _rejected(*rejection, text)
    ingest = value.get("ingest_time")
    ingest_time = iso_micros(ingest) if isinstance(ingest, str) else None
    if value.get(HEARTBEAT_FIELD) is True:
        if ingest_time is None:
            return _rejected("missing_field" if ingest is None else "invalid_ingest_time", "ingest_time")
        return {"ingest_time": ingest_time, HEARTBEAT_FIELD: True, "reject_reason": None}
    for name in (*_TEXT_FIELDS, "value", "event_time"):
        if value.get(name) is None or (isinstance(value[name], str) and not value[name].strip(" ")):
            return _rejected("missing_field", name)
    for name in (*_TEXT_FIELDS, "event_time"):
        if not isinstance(value[name], str):
            return _rejected("wrong_type", name)
    if not isinstance(value["value"], int) or isinstance(value["value"], bool) or abs(value["value"]) >= 1 << 63:
        return _rejected("wrong_type", "value")
    event_time, rejection = event_clock(value["event_time"], ingest, ingest_time, max_clock_skew)
    if rejection is not None:
        return _rejected(*rejection)
    fields = {name: value[name] for name in (*_TEXT_FIELDS, "value")}
    return {**fields, "event_time": event_time, "ingest_time": ingest_time, "reject_reason": None}


def parse_readings(raw: pa.Table, max_clock_skew: int) -> pa.Table:
    """``PARSED_SCHEMA`` rows for raw log lines (``segment``, ``line_number``, ``raw_line`` and
    ``line_bytes``), one per line, in the order given."""
    require_skew(max_clock_skew)
    lengths = raw["line_bytes"].to_pylist() if "line_bytes" in raw.column_names else [None] * raw.num_rows
    rows = [
        parse_reading(line, length, max_clock_skew)
        for line, length in zip(raw["raw_line"].cast(pa.binary()).to_pylist(), lengths)
    ]
    texts = pa.array([row.get("raw_text") for row in rows], pa.string())  # a line that is not text as it stands
    columns = {
        "segment": raw["segment"],
        "line_number": raw["line_number"],
        "raw_line": pc.coalesce(texts, raw["raw_line"]) if texts.null_count < len(texts) else raw["raw_line"],
    }
    for field in PARSED_SCHEMA:
        if field.name not in columns:
            values = [row.get(field.name) for row in rows]
            if field.name == HEARTBEAT_FIELD:
                values = [bool(v) for v in values]
            columns[field.name] = pa.array(values, pa.int64() if field.type == UTC_MICROS else field.type)
    return pa.table(columns).cast(PARSED_SCHEMA)

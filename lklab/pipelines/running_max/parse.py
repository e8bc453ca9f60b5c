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

from functools import partial

import pyarrow as pa

from lklab.pipelines.contract import LineFormat
from shared.line_checks import dead_letter_row, event_clock, read_event_line, require_skew
from shared.line_rows import EVENT_CLOCK, EVENT_ID, LINE_POSITION, PARSE_OUTCOME, RAW_LINE, parsed_table

__all__ = ["PARSED_SCHEMA", "parse_readings", "parse_reading", "line_format"]

_TEXT_FIELDS = ("event_id", "key")
PARSED_SCHEMA = pa.schema(
    [
        *LINE_POSITION,
        RAW_LINE,
        EVENT_ID,
        pa.field("key", pa.string()),
        pa.field("value", pa.int64()),
        *EVENT_CLOCK,
        *PARSE_OUTCOME,
    ]
)


def parse_reading(line: bytes, line_bytes: int | None, appended_at: str | None = None, *, max_clock_skew: int) -> dict:
    """One line's fields (times in microseconds) or its ``reject_reason`` and ``reject_detail``
    (``appended_at``: its segment's stamp, ``shared.line_checks``)."""
    value, ingest_time, settled = read_event_line(line, line_bytes, appended_at)
    if settled is not None:
        return settled
    for name in (*_TEXT_FIELDS, "value", "event_time"):
        if value.get(name) is None or (isinstance(value[name], str) and not value[name].strip(" ")):
            return dead_letter_row("missing_field", name)
    for name in (*_TEXT_FIELDS, "event_time"):
        if not isinstance(value[name], str):
            return dead_letter_row("wrong_type", name)
    if not isinstance(value["value"], int) or isinstance(value["value"], bool) or abs(value["value"]) >= 1 << 63:
        return dead_letter_row("wrong_type", "value")
    event_time, rejection = event_clock(value["event_time"], value.get("ingest_time"), ingest_time, max_clock_skew)
    if rejection is not None:
        return dead_letter_row(*rejection)
    fields = {name: value[name] for name in (*_TEXT_FIELDS, "value")}
    return {**fields, "event_time": event_time, "ingest_time": ingest_time, "reject_reason": None}


def line_format() -> LineFormat:
    """Its lines, for ``lklab ingest``: checked by this parser."""
    fields = (*_TEXT_FIELDS, "value", "event_time")
    return LineFormat(fields, lambda raw, config: parse_readings(raw, config.max_clock_skew), exact=True)


def parse_readings(raw: pa.Table, max_clock_skew: int) -> pa.Table:
    """``PARSED_SCHEMA`` rows for raw log lines (``segment``, ``line_number``, ``raw_line`` and
    ``line_bytes``), one per line, in the order given."""
    require_skew(max_clock_skew)
    return parsed_table(raw, partial(parse_reading, max_clock_skew=max_clock_skew), PARSED_SCHEMA)

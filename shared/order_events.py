"""Orders and payments: their log lines, parsing and validation (the ``order_payments`` pipeline).

Orders and payments share one log with every other line of the lab. A line is one JSON object::

    {"event_id": "o-1", "kind": "order", "order_id": "ord-7", "amount": "40.00",
     "currency": "EUR", "event_time": "2026-01-05T10:00:00Z", "ingest_time": "..."}

``kind`` is ``order`` (the order was placed: ``amount`` is its total) or ``payment`` (a payment
gateway confirmed money for ``order_id``: ``amount`` is what it took). ``amount`` is a decimal
*string*, positive, at most ``AMOUNT_PRECISION - AMOUNT_SCALE`` integer digits and
``AMOUNT_SCALE`` decimal places, never rounded (as billing events: ``shared.events``); times are
ISO-8601 with ``Z`` or an offset, held in UTC as integer microseconds.

``parse_order_lines`` keeps every line: a valid line gets its typed columns and a null
``reject_reason``; any other line gets the first failing reason of ``REJECT_REASONS`` (checked in
that order; the names are billing's where the check is the same, ``invalid_kind`` where billing
has ``invalid_event_type``) and ``reject_detail`` naming the field. A heartbeat
(``{"heartbeat": true, "ingest_time": ...}``) parses with ``heartbeat`` true, as in
``shared.events``. Every line is exactly one of: an event, a heartbeat, a dead letter.

The rule is written once, in Python over an Arrow table of raw lines (the stream step calls it on
a micro-batch); ``parse_order_events`` runs the same function over a Spark DataFrame of raw
lines (``RAW_LINE_SCHEMA``), partition by partition.
"""

from __future__ import annotations

import json
import re
from datetime import datetime, timezone
from decimal import Decimal

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame
from pyspark.sql.pandas.types import from_arrow_schema

from shared.currencies import CURRENCY_CODES
from shared.events import AMOUNT_PRECISION, AMOUNT_SCALE, HEARTBEAT_FIELD, UTC_MICROS
from shared.spark_arrow import per_partition

__all__ = [
    "KINDS", "ORDER", "PAYMENT", "REQUIRED_FIELDS", "REJECT_REASONS", "PAYLOAD_COLUMNS",
    "ORDER_EVENT_SCHEMA", "PARSED_ORDER_SCHEMA", "RAW_ARROW_SCHEMA",
    "parse_order_line", "parse_order_lines", "order_events", "parse_order_events", "valid_order_events",
]

ORDER, PAYMENT = "order", "payment"
KINDS = (ORDER, PAYMENT)
REQUIRED_FIELDS = ("event_id", "kind", "order_id", "amount", "currency", "event_time")
# what a retry repeats: a later copy of an event_id that differs in one of these is a conflict
PAYLOAD_COLUMNS = ("kind", "order_id", "amount", "currency", "event_time")

REJECT_REASONS = {
    "empty_line": "the line is blank",
    "not_json": "the line is not valid JSON",
    "not_an_object": "the line is JSON but not an object",
    "missing_field": "a required field is absent, null or empty (detail: the field)",
    "wrong_type": "a field is not a JSON string (detail: the field)",
    "invalid_kind": f"kind is not one of {', '.join(KINDS)}",
    "invalid_amount": "amount is not a plain decimal such as 12.34",
    "amount_out_of_range": (
        f"amount has more than {AMOUNT_PRECISION - AMOUNT_SCALE} integer digits or more than "
        f"{AMOUNT_SCALE} decimal places (never rounded)"
    ),
    "amount_sign": "an order's total and a payment must be positive",
    "invalid_currency": "currency is not an ISO 4217 code",
    "invalid_event_time": "event_time is not ISO-8601 with Z or an offset",
    "invalid_ingest_time": "ingest_time is present but not ISO-8601 with Z or an offset",
}

AMOUNT = pa.decimal128(AMOUNT_PRECISION, AMOUNT_SCALE)
RAW_ARROW_SCHEMA = pa.schema(
    [pa.field("segment", pa.int64()), pa.field("line_number", pa.int64()), pa.field("raw_line", pa.string())]
)
ORDER_EVENT_SCHEMA = pa.schema(
    [
        pa.field("segment", pa.int64()),
        pa.field("line_number", pa.int64()),
        pa.field("event_id", pa.string()),
        pa.field("kind", pa.string()),
        pa.field("order_id", pa.string()),
        pa.field("amount", AMOUNT),
        pa.field("currency", pa.string()),
        pa.field("event_time", UTC_MICROS),
        pa.field("ingest_time", UTC_MICROS),
    ]
)
PARSED_ORDER_SCHEMA = pa.schema(
    [
        *ORDER_EVENT_SCHEMA,
        pa.field("raw_line", pa.string()),
        pa.field("reject_reason", pa.string()),
        pa.field("reject_detail", pa.string()),
        pa.field(HEARTBEAT_FIELD, pa.bool_()),
    ]
)

_DECIMAL = re.compile(r"-?[0-9]+(\.[0-9]+)?")
_DECIMAL_IN_RANGE = re.compile(rf"-?[0-9]{{1,{AMOUNT_PRECISION - AMOUNT_SCALE}}}(\.[0-9]{{1,{AMOUNT_SCALE}}})?")
_ISO_TIMESTAMP = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,6})?(Z|[+-][0-9]{2}:[0-9]{2})")
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_CURRENCIES = frozenset(CURRENCY_CODES)


def _micros(text: str) -> int | None:
    """Microseconds since the epoch of an ISO-8601 time with ``Z`` or an offset (None if not one)."""
    if not _ISO_TIMESTAMP.fullmatch(text):
        return None
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:  # e.g. a 30th of February, or an offset of +25:00
        return None
    delta = moment - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def _not_json(constant: str):
    raise ValueError(constant)  # NaN and Infinity are Python's, not JSON's


def _rejected(reason: str, field: str | None = None) -> dict:
    return {"reject_reason": reason, "reject_detail": field, HEARTBEAT_FIELD: False}


def parse_order_line(raw_line: str) -> dict:
    """One line's fields (``event_id`` ... ``ingest_time``; times in microseconds), or its
    ``reject_reason`` and ``reject_detail``; ``heartbeat`` true for a heartbeat."""
    if raw_line.strip(" ") == "":
        return _rejected("empty_line")
    try:
        value = json.loads(raw_line, parse_constant=_not_json)
    except ValueError:
        return _rejected("not_json")
    if not isinstance(value, dict):
        return _rejected("not_an_object")
    ingest = value.get("ingest_time")
    ingest_time = _micros(ingest) if isinstance(ingest, str) else None
    if value.get(HEARTBEAT_FIELD) is True:
        if ingest is None:
            return _rejected("missing_field", "ingest_time")
        if ingest_time is None:
            return _rejected("invalid_ingest_time", "ingest_time")
        return {"ingest_time": ingest_time, "reject_reason": None, "reject_detail": None, HEARTBEAT_FIELD: True}
    for name in REQUIRED_FIELDS:
        if value.get(name) is None:
            return _rejected("missing_field", name)
    for name in REQUIRED_FIELDS:
        if not isinstance(value[name], str):
            return _rejected("wrong_type", name)
    for name in REQUIRED_FIELDS:
        if value[name].strip(" ") == "":
            return _rejected("missing_field", name)
    if value["kind"] not in KINDS:
        return _rejected("invalid_kind", "kind")
    if not _DECIMAL.fullmatch(value["amount"]):
        return _rejected("invalid_amount", "amount")
    if not _DECIMAL_IN_RANGE.fullmatch(value["amount"]):
        return _rejected("amount_out_of_range", "amount")
    amount = Decimal(value["amount"])
    if amount <= 0:
        return _rejected("amount_sign", "amount")
    if value["currency"] not in _CURRENCIES:
        return _rejected("invalid_currency", "currency")
    event_time = _micros(value["event_time"])
    if event_time is None:
        return _rejected("invalid_event_time", "event_time")
    if ingest is not None and ingest_time is None:
        return _rejected("invalid_ingest_time", "ingest_time")
    return {
        **{name: value[name] for name in ("event_id", "kind", "order_id", "currency")},
        "amount": amount,
        "event_time": event_time,
        "ingest_time": ingest_time,
        "reject_reason": None,
        "reject_detail": None,
        HEARTBEAT_FIELD: False,
    }


def parse_order_lines(raw: pa.Table) -> pa.Table:
    """``PARSED_ORDER_SCHEMA`` rows for raw lines (``segment``, ``line_number``, ``raw_line``),
    in the order given; a valid event keeps its ``raw_line`` too."""
    parsed = [parse_order_line(line) for line in raw["raw_line"].to_pylist()]
    columns = {"segment": raw["segment"], "line_number": raw["line_number"]}
    for field in ORDER_EVENT_SCHEMA:
        if field.name in columns:
            continue
        values = [row.get(field.name) for row in parsed]
        if field.type == UTC_MICROS:
            columns[field.name] = pa.array(values, pa.int64()).cast(UTC_MICROS)
        else:
            columns[field.name] = pa.array(values, field.type)
    columns["raw_line"] = raw["raw_line"]
    for name in ("reject_reason", "reject_detail"):
        columns[name] = pa.array([row[name] for row in parsed], pa.string())
    columns[HEARTBEAT_FIELD] = pa.array([row[HEARTBEAT_FIELD] for row in parsed], pa.bool_())
    return pa.table(columns).cast(PARSED_ORDER_SCHEMA)


def order_events(parsed: pa.Table) -> pa.Table:
    """The lines of ``parsed`` that are events (valid, not heartbeats), as ``ORDER_EVENT_SCHEMA``."""
    is_event = pc.and_(pc.is_null(parsed["reject_reason"]), pc.invert(parsed[HEARTBEAT_FIELD]))
    return parsed.filter(is_event).select(ORDER_EVENT_SCHEMA.names).cast(ORDER_EVENT_SCHEMA)


def parse_order_events(raw: DataFrame) -> DataFrame:
    """``parse_order_lines`` over a Spark DataFrame of raw lines (no row is dropped)."""
    return per_partition(raw, parse_order_lines, from_arrow_schema(PARSED_ORDER_SCHEMA))


def valid_order_events(parsed: DataFrame) -> DataFrame:
    """The events of a parsed DataFrame, with the ``ORDER_EVENT_SCHEMA`` columns only."""
    return parsed.where(f"reject_reason IS NULL AND NOT {HEARTBEAT_FIELD}").select(*ORDER_EVENT_SCHEMA.names)

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
has ``invalid_event_type``) and ``reject_detail`` naming the field. The checks of a line's bytes,
its JSON and its clock are every pipeline's (``shared.line_checks``, in its Python form): a line
cut at ``max-line-bytes`` or not UTF-8, a repeated key, and an event dated more than
``max-clock-skew`` after it arrived (``event_time_in_future``) are dead letters as for billing. A heartbeat
(``{"heartbeat": true, "ingest_time": ...}``) parses with ``heartbeat`` true, as in
``shared.events``. Every line is exactly one of: an event, a heartbeat, a dead letter.

The rule is written once, in Python over an Arrow table of raw lines (the stream step calls it on
a micro-batch); ``parse_order_events`` runs the same function over a Spark DataFrame of raw
lines (``RAW_LINE_SCHEMA``), partition by partition.
"""

from __future__ import annotations

import re
from decimal import Decimal
from functools import partial

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame
from pyspark.sql.pandas.types import from_arrow_schema

from lklab.pipelines.contract import LineFormat
from shared.config import LabConfig
from shared.currencies import CURRENCY_CODES
from shared.events import AMOUNT_PRECISION, AMOUNT_SCALE, HEARTBEAT_FIELD
from shared.line_checks import dead_letter_row, event_clock, read_event_line, reject_reasons, require_skew
from shared.line_rows import LINE_POSITION, RAW_LINE, event_schema, parsed_schema, parsed_table
from shared.spark_arrow import per_partition

__all__ = [
    "line_format",
    "KINDS",
    "ORDER",
    "PAYMENT",
    "REQUIRED_FIELDS",
    "REJECT_REASONS",
    "PAYLOAD_COLUMNS",
    "ORDER_EVENT_SCHEMA",
    "PARSED_ORDER_SCHEMA",
    "RAW_ARROW_SCHEMA",
    "parse_order_line",
    "parse_order_lines",
    "order_events",
    "parse_order_events",
    "valid_order_events",
]

ORDER, PAYMENT = "order", "payment"
KINDS = (ORDER, PAYMENT)
REQUIRED_FIELDS = ("event_id", "kind", "order_id", "amount", "currency", "event_time")
# what a retry repeats: a later copy of an event_id that differs in one of these is a conflict
PAYLOAD_COLUMNS = ("kind", "order_id", "amount", "currency", "event_time")

REJECT_REASONS = reject_reasons(
    {
        "invalid_kind": f"kind is not one of {', '.join(KINDS)}",
        "invalid_amount": "amount is not a plain decimal such as 12.34",
        "amount_out_of_range": (
            f"amount has more than {AMOUNT_PRECISION - AMOUNT_SCALE} integer digits or more than "
            f"{AMOUNT_SCALE} decimal places (never rounded)"
        ),
        "amount_sign": "an order's total and a payment must be positive",
        "invalid_currency": "currency is not an ISO 4217 code",
    }
)

AMOUNT = pa.decimal128(AMOUNT_PRECISION, AMOUNT_SCALE)
RAW_ARROW_SCHEMA = pa.schema([*LINE_POSITION, RAW_LINE])
ORDER_EVENT_SCHEMA = event_schema(
    pa.field("kind", pa.string()),
    pa.field("order_id", pa.string()),
    pa.field("amount", AMOUNT),
    pa.field("currency", pa.string()),
)
PARSED_ORDER_SCHEMA = parsed_schema(ORDER_EVENT_SCHEMA)

_DECIMAL = re.compile(r"-?[0-9]+(\.[0-9]+)?")
_DECIMAL_IN_RANGE = re.compile(rf"-?[0-9]{{1,{AMOUNT_PRECISION - AMOUNT_SCALE}}}(\.[0-9]{{1,{AMOUNT_SCALE}}})?")
_CURRENCIES = frozenset(CURRENCY_CODES)


def parse_order_line(
    raw_line: str | bytes,
    line_bytes: int | None = None,
    appended_at: str | None = None,
    max_clock_skew: int = LabConfig.max_clock_skew,
) -> dict:
    """One line's fields (``event_id`` ... ``ingest_time``; times in microseconds), or its
    ``reject_reason`` and ``reject_detail``; ``heartbeat`` true for a heartbeat.

    ``raw_line``: the line's text, or the bytes the reader kept of it; ``line_bytes``: the whole
    line's length (None: it is whole); ``appended_at``: its segment's stamp (``shared.line_checks``);
    ``max_clock_skew`` in microseconds. A dead letter's
    ``raw_text`` is what its ``raw_line`` becomes when it is not text as it stands
    (``shared.line_checks``; None: it is).
    """
    line = raw_line.encode() if isinstance(raw_line, str) else raw_line
    value, ingest_time, settled = read_event_line(line, line_bytes, appended_at)
    if settled is not None:
        return settled
    for name in REQUIRED_FIELDS:
        if value.get(name) is None:
            return dead_letter_row("missing_field", name)
    for name in REQUIRED_FIELDS:
        if not isinstance(value[name], str):
            return dead_letter_row("wrong_type", name)
    for name in REQUIRED_FIELDS:
        if value[name].strip(" ") == "":
            return dead_letter_row("missing_field", name)
    if value["kind"] not in KINDS:
        return dead_letter_row("invalid_kind", "kind")
    if not _DECIMAL.fullmatch(value["amount"]):
        return dead_letter_row("invalid_amount", "amount")
    if not _DECIMAL_IN_RANGE.fullmatch(value["amount"]):
        return dead_letter_row("amount_out_of_range", "amount")
    amount = Decimal(value["amount"])
    if amount <= 0:
        return dead_letter_row("amount_sign", "amount")
    if value["currency"] not in _CURRENCIES:
        return dead_letter_row("invalid_currency", "currency")
    event_time, rejection = event_clock(value["event_time"], value.get("ingest_time"), ingest_time, max_clock_skew)
    if rejection is not None:
        return dead_letter_row(*rejection)
    return {
        **{name: value[name] for name in ("event_id", "kind", "order_id", "currency")},
        "amount": amount,
        "event_time": event_time,
        "ingest_time": ingest_time,
        "reject_reason": None,
        "reject_detail": None,
        HEARTBEAT_FIELD: False,
    }


def line_format() -> LineFormat:
    """Its lines, for ``lklab ingest``: checked by this parser."""
    return LineFormat(REQUIRED_FIELDS, lambda raw, config: parse_order_lines(raw, config.max_clock_skew), exact=True)


def parse_order_lines(raw: pa.Table, max_clock_skew: int = LabConfig.max_clock_skew) -> pa.Table:
    """``PARSED_ORDER_SCHEMA`` rows for raw lines (``segment``, ``line_number``, ``raw_line``
    and, as the log's readers give them, ``line_bytes``), in the order given; a valid event
    keeps its ``raw_line`` too. ``raw_line`` may hold bytes that are not UTF-8 (a Spark string
    can): they are read as bytes, never decoded in Arrow."""
    require_skew(max_clock_skew)
    return parsed_table(raw, partial(parse_order_line, max_clock_skew=max_clock_skew), PARSED_ORDER_SCHEMA)


def order_events(parsed: pa.Table) -> pa.Table:
    """The lines of ``parsed`` that are events (valid, not heartbeats), as ``ORDER_EVENT_SCHEMA``."""
    is_event = pc.and_(pc.is_null(parsed["reject_reason"]), pc.invert(parsed[HEARTBEAT_FIELD]))
    return parsed.filter(is_event).select(ORDER_EVENT_SCHEMA.names).cast(ORDER_EVENT_SCHEMA)


def parse_order_events(raw: DataFrame, max_clock_skew: int = LabConfig.max_clock_skew) -> DataFrame:
    """``parse_order_lines`` over a Spark DataFrame of raw lines (``RAW_LINE_SCHEMA``; no row is dropped)."""
    require_skew(max_clock_skew)
    return per_partition(
        raw, partial(parse_order_lines, max_clock_skew=max_clock_skew), from_arrow_schema(PARSED_ORDER_SCHEMA)
    )


def valid_order_events(parsed: DataFrame) -> DataFrame:
    """The events of a parsed DataFrame, with the ``ORDER_EVENT_SCHEMA`` columns only."""
    return parsed.where(f"reject_reason IS NULL AND NOT {HEARTBEAT_FIELD}").select(*ORDER_EVENT_SCHEMA.names)

"""Page views: the second pipeline's log lines, parsing and validation.

A page-view line is one JSON object::

    {"event_id": "v-1", "user_id": "user-7", "url": "https://shop.example/cart",
     "event_time": "2026-01-05T10:00:00Z", "ingest_time": "..."}

Every field is a JSON string. ``url`` is an absolute ``http``/``https`` URL without whitespace,
compared exactly as written (no normalisation: ``/cart`` and ``/cart/`` are two URLs). Times are
ISO-8601 with ``Z`` or an offset, held in UTC microseconds; ``ingest_time`` is stamped by the
log's writer (``shared.eventlog``), like every line's.

``parse_page_views`` keeps every line, as ``shared.events.parse_events`` does for billing: a
valid view gets its typed columns and a null ``reject_reason``; any other line gets the first
failing reason of ``REJECT_REASONS`` (checked in that order; the names are the billing ones
where the check is the same, plus ``invalid_url``) and ``reject_detail`` naming the field. A
heartbeat (``{"heartbeat": true, "ingest_time": ...}``) parses with ``heartbeat`` true. Every
line is therefore exactly one of: a view, a heartbeat, a dead letter.

Unlike ``parse_events`` there is no fast path for the writers' own layout: every line goes
through Spark's variant type (one JSON parse, the fields looked up with their JSON types).
"""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from shared.dedup import first_copies, mark_duplicates
from shared.events import (
    DEAD_LETTER_COLUMNS,
    HEARTBEAT_FIELD,
    RAW_LINE_SCHEMA,
    UTC_MICROS,
    rejected_lines,
)

__all__ = [
    "REQUIRED_FIELDS", "PAYLOAD_COLUMNS", "REJECT_REASONS", "PAGE_VIEW_SCHEMA", "PAGE_VIEW_COLUMNS", "PARSED_SCHEMA",
    "RAW_LINE_SCHEMA", "DEAD_LETTER_COLUMNS", "parse_page_views", "valid_page_views", "deduplicated_page_views", "rejected_lines",
]

REQUIRED_FIELDS = ("event_id", "user_id", "url", "event_time")
# What a faithful resend repeats (``shared.dedup``): ``ingest_time`` is not payload.
PAYLOAD_COLUMNS = ("user_id", "url", "event_time")

REJECT_REASONS = {
    "empty_line": "the line is blank",
    "not_json": "the line is not valid JSON",
    "not_an_object": "the line is JSON but not an object",
    "missing_field": "a required field is absent, null or empty (detail: the field)",
    "wrong_type": "a field is not a JSON string (detail: the field)",
    "invalid_url": "url is not an absolute http:// or https:// URL without whitespace",
    "invalid_event_time": "event_time is not ISO-8601 with Z or an offset",
    "invalid_ingest_time": "ingest_time is present but not ISO-8601 with Z or an offset",
}

PAGE_VIEW_SCHEMA = pa.schema(
    [
        pa.field("segment", pa.int64()),
        pa.field("line_number", pa.int64()),
        pa.field("event_id", pa.string()),
        pa.field("user_id", pa.string()),
        pa.field("url", pa.string()),
        pa.field("event_time", UTC_MICROS),
        pa.field("ingest_time", UTC_MICROS),
    ]
)
PAGE_VIEW_COLUMNS = tuple(PAGE_VIEW_SCHEMA.names)
# ``parse_page_views`` rows as Arrow: what the stream step takes.
PARSED_SCHEMA = pa.schema(
    [
        *PAGE_VIEW_SCHEMA,
        pa.field("raw_line", pa.string()),
        pa.field("reject_reason", pa.string()),
        pa.field("reject_detail", pa.string()),
        pa.field(HEARTBEAT_FIELD, pa.bool_()),
    ]
)

_FIELDS = REQUIRED_FIELDS + ("ingest_time",)
_URL = r"^https?://[^\s/?#]+[^\s]*$"
_ISO_TIMESTAMP = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,6})?(Z|[+-][0-9]{2}:[0-9]{2})$"


def _timestamp(text: Column) -> Column:
    return F.when(text.rlike(_ISO_TIMESTAMP), F.try_to_timestamp(text))


def parse_page_views(raw: DataFrame) -> DataFrame:
    """Parse and validate log lines (``RAW_LINE_SCHEMA``) into typed page views.

    Returns every input row with the ``PAGE_VIEW_COLUMNS`` (null where not parseable) plus
    ``raw_line``, ``reject_reason``, ``reject_detail`` and ``heartbeat``: ``PARSED_SCHEMA``.
    """
    v = F.try_parse_json("raw_line")
    located = raw.select(
        "segment", "line_number", "raw_line",
        v.isNull().alias("_not_json"),
        F.col("raw_line").rlike("^\\s*[{]").alias("_is_object"),
        *[F.try_variant_get(v, f"$.{name}", "variant").alias(f"_v_{name}") for name in (*_FIELDS, HEARTBEAT_FIELD)],
    )
    kind = {name: F.schema_of_variant(F.col(f"_v_{name}")) for name in _FIELDS}
    text = {name: F.try_variant_get(F.col(f"_v_{name}"), "$", "string") for name in _FIELDS}
    beat = F.col(f"_v_{HEARTBEAT_FIELD}")
    typed = located.select(
        "segment", "line_number", "raw_line", "_not_json", "_is_object",
        *[kind[name].alias(f"_k_{name}") for name in _FIELDS],
        *[text[name].alias(f"_t_{name}") for name in _FIELDS],
        F.coalesce((F.schema_of_variant(beat) == "BOOLEAN") & F.try_variant_get(beat, "$", "boolean"), F.lit(False)).alias("_beat"),
    ).withColumns({"_event_time": _timestamp(F.col("_t_event_time")), "_ingest_time": _timestamp(F.col("_t_ingest_time"))})
    return typed.select(
        "segment", "line_number",
        *[F.col(f"_t_{name}").alias(name) for name in ("event_id", "user_id", "url")],
        F.col("_event_time").alias("event_time"),
        F.col("_ingest_time").alias("ingest_time"),
        "raw_line",
        *_verdict(),
    ).select(*PARSED_SCHEMA.names)


def _verdict() -> list[Column]:
    """``reject_reason``, ``reject_detail`` (the first failing check, in ``REJECT_REASONS``
    order) and ``heartbeat`` (a heartbeat that passed its checks)."""
    kind = {name: F.col(f"_k_{name}") for name in _FIELDS}
    text = {name: F.col(f"_t_{name}") for name in _FIELDS}
    beat = F.col("_beat")
    ingest_present = kind["ingest_time"].isNotNull() & (kind["ingest_time"] != "VOID")
    checks: list[tuple[Column, str, str | None]] = [
        (F.trim("raw_line") == "", "empty_line", None),
        (F.col("_not_json"), "not_json", None),
        (~F.col("_is_object"), "not_an_object", None),
        (beat & ~ingest_present, "missing_field", "ingest_time"),
        (beat & ((kind["ingest_time"] != "STRING") | F.col("_ingest_time").isNull()), "invalid_ingest_time", "ingest_time"),
    ]
    view = [(kind[name].isNull() | (kind[name] == "VOID"), "missing_field", name) for name in REQUIRED_FIELDS]
    view += [(kind[name] != "STRING", "wrong_type", name) for name in REQUIRED_FIELDS]
    view += [(F.trim(text[name]) == "", "missing_field", name) for name in REQUIRED_FIELDS]
    view += [
        (~text["url"].rlike(_URL), "invalid_url", "url"),
        (F.col("_event_time").isNull(), "invalid_event_time", "event_time"),
        (ingest_present & ((kind["ingest_time"] != "STRING") | F.col("_ingest_time").isNull()), "invalid_ingest_time", "ingest_time"),
    ]
    checks += [(~beat & failed, name, field) for failed, name, field in view]
    reason = detail = None
    for failed, name, field in checks:
        reason = F.when(failed, F.lit(name)) if reason is None else reason.when(failed, F.lit(name))
        detail = F.when(failed, F.lit(field).cast("string")) if detail is None else detail.when(failed, F.lit(field).cast("string"))
    return [reason.alias("reject_reason"), detail.alias("reject_detail"), (beat & reason.isNull()).alias(HEARTBEAT_FIELD)]


def valid_page_views(parsed: DataFrame) -> DataFrame:
    """Lines that are page views (passed validation, not heartbeats), ``PAGE_VIEW_COLUMNS`` only."""
    return parsed.where(f"reject_reason IS NULL AND NOT {HEARTBEAT_FIELD}").select(*PAGE_VIEW_COLUMNS)


def deduplicated_page_views(parsed: DataFrame) -> DataFrame:
    """The batch view's page views: valid views, first copies only (``shared.dedup`` over the
    whole log, with the page-view payload), ``PAGE_VIEW_COLUMNS``."""
    return first_copies(mark_duplicates(valid_page_views(parsed), PAYLOAD_COLUMNS))

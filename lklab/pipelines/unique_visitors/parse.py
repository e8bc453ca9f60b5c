"""Page views: the second pipeline's log lines, parsing and validation.

A page-view line is one JSON object::

    {"event_id": "v-1", "user_id": "user-7", "url": "https://shop.example/cart",
     "event_time": "2026-01-05T10:00:00Z", "ingest_time": "..."}

Every field is a JSON string. ``url`` is an absolute ``http``/``https`` URL without whitespace,
compared exactly as written (no normalisation: ``/cart`` and ``/cart/`` are two URLs). Times are
ISO-8601 with ``Z`` or an offset, held in UTC microseconds; a line without ``ingest_time`` has
its segment's stamp as ingest time (``shared.line_checks``), like every line.

``parse_page_views`` keeps every line, as ``shared.events.parse_events`` does for billing: a
valid view gets its typed columns and a null ``reject_reason``; any other line gets the first
failing reason of ``REJECT_REASONS`` (checked in that order; the names are the billing ones
where the check is the same, plus ``invalid_url``) and ``reject_detail`` naming the field. The
checks of a line's bytes, its JSON and its clock are every pipeline's (``shared.line_checks``):
a line cut at ``max-line-bytes`` or not UTF-8, a repeated key, and a view dated more than
``max-clock-skew`` after it arrived (``event_time_in_future``: accepted, it would move the
watermark there for good) are dead letters as they are for billing. A heartbeat
(``{"heartbeat": true, "ingest_time": ...}``) parses with ``heartbeat`` true. Every line is
therefore exactly one of: a view, a heartbeat, a dead letter.

Unlike ``parse_events`` there is no fast path for the writers' own layout: every line goes
through Spark's variant type (one JSON parse, the fields looked up with their JSON types).
"""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from lklab.pipelines.contract import LineFormat
from shared.config import LabConfig
from shared.dedup import first_copies, mark_duplicates
from shared.events import (
    DEAD_LETTER_COLUMNS,
    HEARTBEAT_FIELD,
    RAW_LINE_SCHEMA,
    rejected_lines,
)
from shared.line_checks import (
    APPENDED_AT,
    OBJECT_START,
    Check,
    dead_letter_text,
    first_failure,
    future_check,
    ingest_time_of,
    line_checks,
    reject_reasons,
    repeated_key,
    require_skew,
    with_appended_at,
)
from shared.line_rows import event_schema, parsed_schema

__all__ = [
    "line_format",
    "REQUIRED_FIELDS",
    "PAYLOAD_COLUMNS",
    "REJECT_REASONS",
    "PAGE_VIEW_SCHEMA",
    "PAGE_VIEW_COLUMNS",
    "PARSED_SCHEMA",
    "RAW_LINE_SCHEMA",
    "DEAD_LETTER_COLUMNS",
    "parse_page_views",
    "valid_page_views",
    "deduplicated_page_views",
    "rejected_lines",
]

REQUIRED_FIELDS = ("event_id", "user_id", "url", "event_time")
# What a faithful resend repeats (``shared.dedup``): ``ingest_time`` is not payload.
PAYLOAD_COLUMNS = ("user_id", "url", "event_time")

REJECT_REASONS = reject_reasons({"invalid_url": "url is not an absolute http:// or https:// URL without whitespace"})

PAGE_VIEW_SCHEMA = event_schema(pa.field("user_id", pa.string()), pa.field("url", pa.string()))
PAGE_VIEW_COLUMNS = tuple(PAGE_VIEW_SCHEMA.names)
# ``parse_page_views`` rows as Arrow: what the stream step takes.
PARSED_SCHEMA = parsed_schema(PAGE_VIEW_SCHEMA)

_FIELDS = REQUIRED_FIELDS + ("ingest_time",)
_URL = r"^https?://[^\s/?#]+[^\s]*$"
_ISO_TIMESTAMP = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,6})?(Z|[+-][0-9]{2}:[0-9]{2})$"


def _timestamp(text: Column) -> Column:
    return F.when(text.rlike(_ISO_TIMESTAMP), F.try_to_timestamp(text))


def line_format() -> LineFormat:
    """Its lines, for ``lklab ingest``: the checks every line gets, its fields and its event time
    (its parser runs in Spark)."""
    from lklab.line_preview import fields_only

    return fields_only(REQUIRED_FIELDS)


def parse_page_views(raw: DataFrame, max_clock_skew: int = LabConfig.max_clock_skew) -> DataFrame:
    """Parse and validate log lines (``RAW_LINE_SCHEMA``) into typed page views.

    Returns every input row with the ``PAGE_VIEW_COLUMNS`` (null where not parseable) plus
    ``raw_line`` (always text: a line cut or not UTF-8 as ``shared.line_checks`` says),
    ``reject_reason``, ``reject_detail`` and ``heartbeat``: ``PARSED_SCHEMA``.
    ``max_clock_skew`` is in microseconds (the ``max-clock-skew`` setting).
    """
    require_skew(max_clock_skew)
    line = F.col("raw_line")
    shaped = with_appended_at(raw).select(
        "segment",
        "line_number",
        "raw_line",
        "line_bytes",
        APPENDED_AT,
        (F.octet_length(line) == F.col("line_bytes")).alias("_whole"),
        F.is_valid_utf8(line).alias("_utf8"),
    )
    readable = F.col("_whole") & F.col("_utf8")
    v = F.try_parse_json(F.when(readable, line))
    located = shaped.select(
        "*",
        v.isNull().alias("_not_json"),
        F.when(v.isNull() & readable, repeated_key(F.json_object_keys(line))).alias("_repeated_key"),
        *[F.try_variant_get(v, f"$.{name}", "variant").alias(f"_v_{name}") for name in (*_FIELDS, HEARTBEAT_FIELD)],
    )
    kind = {name: F.schema_of_variant(F.col(f"_v_{name}")) for name in _FIELDS}
    text = {name: F.try_variant_get(F.col(f"_v_{name}"), "$", "string") for name in _FIELDS}
    kind["ingest_time"], text["ingest_time"] = ingest_time_of(
        kind["ingest_time"], text["ingest_time"], F.col(APPENDED_AT), ~F.col("_not_json") & line.rlike(OBJECT_START)
    )
    beat = F.col(f"_v_{HEARTBEAT_FIELD}")
    typed = located.select(
        *shaped.columns,
        "_not_json",
        "_repeated_key",
        *[kind[name].alias(f"_k_{name}") for name in _FIELDS],
        *[text[name].alias(f"_t_{name}") for name in _FIELDS],
        F.coalesce(
            (F.schema_of_variant(beat) == "BOOLEAN") & F.try_variant_get(beat, "$", "boolean"), F.lit(False)
        ).alias("_beat"),
    ).withColumns(
        {"_event_time": _timestamp(F.col("_t_event_time")), "_ingest_time": _timestamp(F.col("_t_ingest_time"))}
    )
    judged = typed.withColumn("_reject", first_failure(_checks(max_clock_skew)))
    return judged.select(
        "segment",
        "line_number",
        *[F.col(f"_t_{name}").alias(name) for name in ("event_id", "user_id", "url")],
        F.col("_event_time").alias("event_time"),
        F.col("_ingest_time").alias("ingest_time"),
        F.coalesce(dead_letter_text(line, F.col("_whole"), F.col("_utf8")), line).alias("raw_line"),
        F.col("_reject.reason").alias("reject_reason"),
        F.col("_reject.detail").alias("reject_detail"),
        (F.col("_beat") & F.col("_reject").isNull()).alias(HEARTBEAT_FIELD),
    ).select(*PARSED_SCHEMA.names)


def _checks(max_clock_skew: int) -> list[Check]:
    """The checks of ``REJECT_REASONS``, in order: the line's (``shared.line_checks``), a
    heartbeat's, a view's."""
    kind = {name: F.col(f"_k_{name}") for name in _FIELDS}
    text = {name: F.col(f"_t_{name}") for name in _FIELDS}
    event_time, ingest_time = F.col("_event_time"), F.col("_ingest_time")
    beat = F.col("_beat")
    ingest_present = kind["ingest_time"].isNotNull() & (kind["ingest_time"] != "VOID")
    checks = line_checks(
        F.col("raw_line"),
        F.col("line_bytes"),
        F.col("_whole"),
        F.col("_utf8"),
        F.col("_repeated_key"),
        F.col("_not_json"),
    )
    checks += [
        (beat & ~ingest_present, "missing_field", "ingest_time"),
        (beat & ((kind["ingest_time"] != "STRING") | ingest_time.isNull()), "invalid_ingest_time", "ingest_time"),
    ]
    # past this point a heartbeat has passed every check that applies to it
    view = [(kind[name].isNull() | (kind[name] == "VOID"), "missing_field", name) for name in REQUIRED_FIELDS]
    view += [(kind[name] != "STRING", "wrong_type", name) for name in REQUIRED_FIELDS]
    view += [(F.trim(text[name]) == "", "missing_field", name) for name in REQUIRED_FIELDS]
    view += [
        (~text["url"].rlike(_URL), "invalid_url", "url"),
        (event_time.isNull(), "invalid_event_time", "event_time"),
        (
            ingest_present & ((kind["ingest_time"] != "STRING") | ingest_time.isNull()),
            "invalid_ingest_time",
            "ingest_time",
        ),
        future_check(event_time, ingest_time, text["event_time"], text["ingest_time"], max_clock_skew),
    ]
    return checks + [(~beat & failed, name, field) for failed, name, field in view]


def valid_page_views(parsed: DataFrame) -> DataFrame:
    """Lines that are page views (passed validation, not heartbeats), ``PAGE_VIEW_COLUMNS`` only."""
    return parsed.where(f"reject_reason IS NULL AND NOT {HEARTBEAT_FIELD}").select(*PAGE_VIEW_COLUMNS)


def deduplicated_page_views(parsed: DataFrame) -> DataFrame:
    """The batch view's page views: valid views, first copies only (``shared.dedup`` over the
    whole log, with the page-view payload), ``PAGE_VIEW_COLUMNS``."""
    return first_copies(mark_duplicates(valid_page_views(parsed), PAYLOAD_COLUMNS))

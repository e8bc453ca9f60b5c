"""Billing events: the log's line format, parsing and validation.

A log line is one JSON object::

    {"event_id": "e-1", "account_id": "acct-7", "event_type": "charge", "amount": "12.34",
     "currency": "USD", "event_time": "2026-01-05T10:00:00Z", "ingest_time": "..."}

``amount`` is a decimal *string* (a JSON number may already have passed through a float in the
producer, so it is rejected); at most ``AMOUNT_PRECISION - AMOUNT_SCALE`` integer digits and
``AMOUNT_SCALE`` decimal places, never rounded. Charges are positive, refunds negative,
adjustments either. Times are ISO-8601 with ``Z`` or an offset and are held in UTC.

``parse_events`` keeps every line: a valid line gets the typed columns and a null
``reject_reason``; any other line gets the first failing reason of ``REJECT_REASONS`` (checked
in that order) and ``reject_detail`` naming the field. Nothing is dropped here.

Bad clocks. An event time more than ``max_clock_skew`` (microseconds, the ``max-clock-skew``
setting) ahead of its line's ingest time is ``event_time_in_future``: an event cannot have
happened after it arrived, and accepted, one event dated decades ahead would move the watermark
there for good and make every later event late. A line's ingest time is its ``ingest_time``, or
where it has none its segment's stamp ``appended_at`` (``shared.line_checks``); the check needs
both times: a line with no ingest time is not checked.

Bad bytes. The readers hand over a line's bytes as they are (``RAW_LINE_SCHEMA``), and every
output column is text again: a line that is not UTF-8 is ``invalid_utf8`` and its ``raw_line``
holds its bytes in base64; a line the reader cut (longer than ``max-line-bytes``:
``line_bytes`` exceeds what ``raw_line`` holds) is ``line_too_long`` and its ``raw_line`` holds
the part kept, as text.

A *heartbeat* is a line ``{"heartbeat": true, "ingest_time": "..."}`` written by the log's
writer (or the always-on speed layer) when nothing arrived for a while: it carries no event,
only a moment of processing time, so the log's clock moves on while the traffic is idle (see
``shared.clock``). It parses with ``heartbeat`` true and a null ``reject_reason`` (its other
fields are ignored); one without a valid ``ingest_time`` is a dead letter like any bad line.
Every line is therefore exactly one of: an event, a heartbeat, a dead letter.

The checks of the bytes, the JSON and the clock are every pipeline's (``shared.line_checks``).
"""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import (
    DecimalType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from shared.config import LabConfig
from shared.currencies import CURRENCY_CODES
from shared.expressions import built_once
from shared.line_checks import (
    APPENDED_AT,
    dead_letter_text,
    first_failure,
    future_check,
    in_future,
    ingest_time_of,
    let,
    line_checks,
    reject_reasons,
    repeated_key,
    require_skew,
    with_appended_at,
)
from shared.line_rows import HEARTBEAT_FIELD, UTC_MICROS, event_schema

__all__ = [
    "AMOUNT_PRECISION",
    "AMOUNT_SCALE",
    "AMOUNT_TYPE",
    "EVENT_TYPES",
    "REQUIRED_FIELDS",
    "RAW_LINE_SCHEMA",
    "REJECT_REASONS",
    "EVENT_COLUMNS",
    "EVENT_SCHEMA",
    "DEAD_LETTER_COLUMNS",
    "UTC_MICROS",
    "HEARTBEAT_FIELD",
    "parse_events",
    "valid_events",
    "rejected_lines",
]

AMOUNT_PRECISION = 20
AMOUNT_SCALE = 6
AMOUNT_TYPE = DecimalType(AMOUNT_PRECISION, AMOUNT_SCALE)
EVENT_TYPES = ("charge", "refund", "adjustment")
REQUIRED_FIELDS = ("event_id", "account_id", "event_type", "amount", "currency", "event_time")

# A line as the log's readers give it: ``raw_line`` its bytes (a Spark string need not be
# UTF-8), all of them or, for a line longer than max-line-bytes, its first ones;
# ``line_bytes`` the length of the whole line; ``appended_at`` its segment's stamp (null: none),
# its ingest time where it has no ``ingest_time`` of its own (``shared.line_checks``).
RAW_LINE_SCHEMA = StructType(
    [
        StructField("segment", LongType(), False),
        StructField("line_number", LongType(), False),
        StructField("raw_line", StringType(), False),
        StructField("line_bytes", LongType(), False),
        StructField(APPENDED_AT, StringType(), True),
    ]
)

REJECT_REASONS = reject_reasons(
    {
        "invalid_event_type": f"event_type is not one of {', '.join(EVENT_TYPES)}",
        "invalid_amount": "amount is not a plain decimal such as 12.34 or -0.5",
        "amount_out_of_range": (
            f"amount has more than {AMOUNT_PRECISION - AMOUNT_SCALE} integer digits or more than "
            f"{AMOUNT_SCALE} decimal places (never rounded)"
        ),
        "amount_sign": "a charge must be positive and a refund negative",
        "invalid_currency": "currency is not an ISO 4217 code",
    }
)

EVENT_SCHEMA = event_schema(
    pa.field("account_id", pa.string()),
    pa.field("event_type", pa.string()),
    pa.field("amount", pa.decimal128(AMOUNT_PRECISION, AMOUNT_SCALE)),
    pa.field("currency", pa.string()),
)
EVENT_COLUMNS = tuple(EVENT_SCHEMA.names)
DEAD_LETTER_COLUMNS = ("segment", "line_number", "raw_line", "reject_reason", "reject_detail")


_DECIMAL = r"^-?[0-9]+(\.[0-9]+)?$"
_DECIMAL_IN_RANGE = rf"^-?[0-9]{{1,{AMOUNT_PRECISION - AMOUNT_SCALE}}}(\.[0-9]{{1,{AMOUNT_SCALE}}})?$"
_FIELDS = REQUIRED_FIELDS + ("ingest_time",)  # every field a line may carry
_ISO_TIMESTAMP = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,6})?(Z|[+-][0-9]{2}:[0-9]{2})$"


def _iso_timestamp(text: Column) -> Column:
    """Parse an ISO-8601 string with offset to UTC; null when it is not one."""
    return F.when(text.rlike(_ISO_TIMESTAMP), F.try_to_timestamp(text))


def parse_events(raw: DataFrame, max_clock_skew: int = LabConfig.max_clock_skew) -> DataFrame:
    """Parse and validate log lines (``RAW_LINE_SCHEMA``) into typed events.

    Returns every input row with the ``EVENT_COLUMNS`` (null where not parseable) plus
    ``raw_line`` (always text: see the module docstring for a line that is not), ``reject_reason``,
    ``reject_detail`` and ``heartbeat`` (true for a valid heartbeat line; of its columns only
    ``segment``, ``line_number`` and ``ingest_time`` mean anything). ``max_clock_skew`` is in
    microseconds: ``raw.transform(parse_events, max_clock_skew=config.max_clock_skew)``.

    Two paths give the same rows. A *clean* line (the writers' own layout of a valid event,
    ``_plain_stages``) is read and checked with string functions alone; every other line is
    parsed as JSON into a variant, its fields looked up with their JSON types and checked in
    ``REJECT_REASONS`` order (``_variant_path``). Almost every line of a log is clean.
    """
    require_skew(max_clock_skew)
    parsed = with_appended_at(raw)
    for columns in _parse_stages(max_clock_skew):
        parsed = parsed.select(*columns)
    return parsed


@built_once
def _parse_stages(max_clock_skew: int) -> tuple[list[Column], ...]:
    """The column lists ``parse_events`` selects one after the other.

    Each stage names its results so that Spark evaluates every extraction once per row instead
    of once per check that uses it.
    """
    line = ["segment", "line_number", "raw_line"]
    plain = [name for name in _FIELDS]
    typed = ["amount", "event_time", "ingest_time"]
    split, pieces, checked = _plain_stages(max_clock_skew)
    routed = [
        *line,
        *[f"_plain_{name}" for name in plain],
        *[f"_plain_{name}_typed" for name in typed],
        "_clean",
        # the variant path is one expression, evaluated for the lines that are not clean only
        F.when(
            ~F.col("_clean"),
            _variant_path(F.col("raw_line"), F.col("line_bytes"), F.col(APPENDED_AT), max_clock_skew),
        ).alias("_variant"),
    ]
    clean, variant = F.col("_clean"), F.col("_variant")
    value = lambda name, plain_value: F.when(clean, plain_value).otherwise(variant[name]).alias(name)
    result = [
        "segment",
        "line_number",
        *[value(name, F.col(f"_plain_{name}")) for name in ("event_id", "account_id", "event_type")],
        value("amount", F.col("_plain_amount_typed")),
        value("currency", F.col("_plain_currency")),
        value("event_time", F.col("_plain_event_time_typed")),
        value("ingest_time", F.col("_plain_ingest_time_typed")),
        F.coalesce(variant["raw_text"], F.col("raw_line")).alias("raw_line"),
        variant["reject_reason"].alias("reject_reason"),
        variant["reject_detail"].alias("reject_detail"),
        F.coalesce(variant[HEARTBEAT_FIELD], F.lit(False)).alias(HEARTBEAT_FIELD),
    ]
    return split, pieces, checked, routed, result


def _plain_text(fields: tuple[str, ...]) -> Column:
    """The exact text the log's writers emit for an object of these string fields."""
    pieces: list[Column] = []
    for index, name in enumerate(fields):
        pieces += [F.lit(('{"' if index == 0 else '", "') + name + '": "'), F.col(f"_plain_{name}")]
    return F.concat(*pieces, F.lit('"}'))


def _plain_stages(max_clock_skew: int) -> tuple[list[Column], ...]:
    """Read a line laid out as the log's writers lay out an event, and tell whether it is clean.

    The layout is ``{"event_id": "...", "account_id": "...", ...}``: the ``_FIELDS`` in that
    order (``ingest_time`` may be absent), ``": "`` and ``", "`` between them, no backslash.
    Split on ``"``, the values are every fourth piece, and the line has the layout exactly when
    putting the pieces back in it gives the line itself. Such a line is a JSON object of string
    fields with those texts, unless a value holds a control character (raw control characters
    are not JSON). It is *clean* when no value does and it passes every event check: it is then
    a valid event, with the very values the variant path would give it.

    Neither a line the reader cut (it is shorter than ``line_bytes``) nor one that is not UTF-8
    is ever clean: Spark splits a line's text decoded, each bad byte read as U+FFFD, so the
    pieces put back differ from the line's bytes. No key is named twice in the layout.
    """
    fields = _FIELDS
    line = ["segment", "line_number", "raw_line", "line_bytes", APPENDED_AT]
    split = [*line, F.split("raw_line", '"', -1).alias("_pieces")]
    pieces = [
        *line,
        F.size("_pieces").alias("_piece_count"),
        *[
            F.try_element_at("_pieces", F.lit(4 + 4 * index)).alias(f"_plain_{name}")
            for index, name in enumerate(fields)
        ],
    ]
    text = {name: F.col(f"_plain_{name}") for name in fields}
    laid_out = (
        (
            F.when(F.col("_piece_count") == 4 * len(fields) + 1, _plain_text(fields) == F.col("raw_line"))
            .when(F.col("_piece_count") == 4 * len(fields) - 3, _plain_text(fields[:-1]) == F.col("raw_line"))
            .otherwise(F.lit(False))
        )
        & ~F.col("raw_line").contains("\\")
        & (F.octet_length("raw_line") == F.col("line_bytes"))
    )
    # the line's own ingest time where its layout has one, else its segment's stamp
    _, ingest = ingest_time_of(
        F.when(F.col("_piece_count") == 4 * len(fields) + 1, F.lit("STRING")),
        text["ingest_time"],
        F.col(APPENDED_AT),
        F.lit(True),  # a line laid out so is an object; one that is not never is clean
    )
    typed = _typed({**text, "ingest_time": ingest})
    # Every check of REJECT_REASONS passes. The ones left out cannot fail here: the values are
    # JSON strings, and a value that matches its format (an event type, a decimal, a time, a
    # currency) is not blank.
    event_type, amount = text["event_type"], typed["amount"]
    valid = (
        (F.trim(text["event_id"]) != "")
        & (F.trim(text["account_id"]) != "")
        & text["event_type"].isin(*EVENT_TYPES)
        & amount.isNotNull()
        & ~(((event_type == "charge") & (amount <= 0)) | ((event_type == "refund") & (amount >= 0)))
        & text["currency"].isin(*CURRENCY_CODES)
        & typed["event_time"].isNotNull()
        & (ingest.isNull() | typed["ingest_time"].isNotNull())
        & ~in_future(typed["event_time"], typed["ingest_time"], max_clock_skew)
    )
    no_control = ~F.concat_ws("", *[text[name] for name in fields]).rlike("[\\x00-\\x1F]")
    checked = [
        *line,
        *text.values(),
        *[column.alias(f"_plain_{name}_typed") for name, column in typed.items()],
        F.coalesce(laid_out & valid & no_control, F.lit(False)).alias("_clean"),
    ]
    return split, pieces, checked


def _typed(text) -> dict[str, Column]:
    """``amount``, ``event_time`` and ``ingest_time`` typed from their texts (null when invalid)."""
    return {
        # try_cast: a text such as "1.5\u2028" matches the pattern (a regex's $ allows a final
        # line terminator) yet is no decimal
        "amount": F.when(text["amount"].rlike(_DECIMAL_IN_RANGE), text["amount"].try_cast(AMOUNT_TYPE)),
        "event_time": _iso_timestamp(text["event_time"]),
        "ingest_time": _iso_timestamp(text["ingest_time"]),
    }


def _variant_path(raw_line: Column, line_bytes: Column, appended_at: Column, max_clock_skew: int) -> Column:
    """One line parsed and checked through a variant (its ingest time as ``ingest_time_of``
    reads it, with its segment's stamp ``appended_at``): a struct of the typed event columns,
    ``raw_text`` (what ``raw_line`` becomes, null: itself), ``reject_reason``, ``reject_detail``
    and ``heartbeat``.

    A line the reader cut, or one that is not UTF-8, is not parsed at all. Spark's JSON parser
    refuses an object that names a key twice (``try_parse_json`` gives null); the keys of such an
    object, as ``json_object_keys`` lists them (the outermost object's only: a key repeated in a
    nested object leaves the line ``not_json``), tell it from a line that is not JSON.

    A higher-order function keeps Spark from generating code for it (it is interpreted, row by
    row): that keeps the generated code of the clean path small enough for the JIT compiler,
    and costs little, as few lines take this path.
    """
    fields = _FIELDS
    whole = F.octet_length(raw_line) == line_bytes
    utf8 = F.is_valid_utf8(raw_line)
    readable = whole & utf8

    def located(v: Column) -> Column:
        return F.struct(
            v.isNull().alias("not_json"),
            F.when(v.isNull() & readable, repeated_key(F.json_object_keys(raw_line))).alias("repeated_key"),
            # JSON that parsed is an object exactly when it opens with "{" after whitespace: a
            # regex is cheaper than the schema of the whole object
            raw_line.rlike("^\\s*[{]").alias("is_object"),
            *[F.variant_get(v, f"$.{name}", "variant").alias(name) for name in fields],
            F.try_variant_get(v, f"$.{HEARTBEAT_FIELD}", "variant").alias(HEARTBEAT_FIELD),
        )

    def extracted(field: Column) -> Column:
        beat = field[HEARTBEAT_FIELD]
        return F.struct(
            field["not_json"].alias("not_json"),
            field["repeated_key"].alias("repeated_key"),
            field["is_object"].alias("is_object"),
            *[F.try_variant_get(field[name], "$", "string").alias(f"text_{name}") for name in fields],
            *[F.schema_of_variant(field[name]).alias(f"type_{name}") for name in fields],
            # a heartbeat is exactly the JSON value true (not "true", not 1)
            F.coalesce(
                (F.schema_of_variant(beat) == "BOOLEAN") & F.try_variant_get(beat, "$", "boolean"), F.lit(False)
            ).alias("heartbeat"),
        )

    def checked(parts: Column) -> Column:
        text = {name: parts[f"text_{name}"] for name in fields}
        kind = {name: parts[f"type_{name}"] for name in fields}
        kind["ingest_time"], text["ingest_time"] = ingest_time_of(
            kind["ingest_time"], text["ingest_time"], appended_at, ~parts["not_json"] & parts["is_object"]
        )
        return let(
            F.struct(*[column.alias(name) for name, column in _typed(text).items()]),
            lambda typed: _variant_result(raw_line, line_bytes, whole, utf8, parts, text, kind, typed, max_clock_skew),
        )

    parsed = F.try_parse_json(F.when(readable, raw_line))
    return let(parsed, lambda v: let(located(v), lambda field: let(extracted(field), checked)))


def _variant_result(
    raw_line: Column,
    line_bytes: Column,
    whole: Column,
    utf8: Column,
    parts: Column,
    text: dict,
    kind: dict,
    typed: Column,
    max_clock_skew: int,
) -> Column:
    """The checks of ``REJECT_REASONS`` in order over a line's variant fields, and the result."""
    heartbeat = parts["heartbeat"]
    amount, event_time, ingest_time = typed["amount"], typed["event_time"], typed["ingest_time"]
    ingest_present = kind["ingest_time"].isNotNull() & (kind["ingest_time"] != "VOID")
    checks = line_checks(
        raw_line, line_bytes, whole, utf8, parts["repeated_key"], parts["not_json"], parts["is_object"]
    )
    checks += [
        (heartbeat & ~ingest_present, "missing_field", "ingest_time"),
        (heartbeat & ((kind["ingest_time"] != "STRING") | ingest_time.isNull()), "invalid_ingest_time", "ingest_time"),
    ]
    # past this point a heartbeat has passed every check that applies to it
    event = [(kind[name].isNull() | (kind[name] == "VOID"), "missing_field", name) for name in REQUIRED_FIELDS]
    event += [(kind[name] != "STRING", "wrong_type", name) for name in REQUIRED_FIELDS]
    event += [(F.trim(text[name]) == "", "missing_field", name) for name in REQUIRED_FIELDS]
    event += [
        (~text["event_type"].isin(*EVENT_TYPES), "invalid_event_type", "event_type"),
        (
            ~text["amount"].rlike(_DECIMAL) | (text["amount"].rlike(_DECIMAL_IN_RANGE) & amount.isNull()),
            "invalid_amount",
            "amount",
        ),
        (amount.isNull(), "amount_out_of_range", "amount"),
        (
            ((text["event_type"] == "charge") & (amount <= 0)) | ((text["event_type"] == "refund") & (amount >= 0)),
            "amount_sign",
            "amount",
        ),
        (~text["currency"].isin(*CURRENCY_CODES), "invalid_currency", "currency"),
        (event_time.isNull(), "invalid_event_time", "event_time"),
        (
            ingest_present & ((kind["ingest_time"] != "STRING") | ingest_time.isNull()),
            "invalid_ingest_time",
            "ingest_time",
        ),
        future_check(event_time, ingest_time, text["event_time"], text["ingest_time"], max_clock_skew),
    ]
    checks += [(~heartbeat & failed, name, field) for failed, name, field in event]
    return let(
        first_failure(checks),
        lambda reject: F.struct(
            dead_letter_text(raw_line, whole, utf8).alias("raw_text"),
            *[text[name].alias(name) for name in ("event_id", "account_id", "event_type")],
            amount.alias("amount"),
            text["currency"].alias("currency"),
            event_time.alias("event_time"),
            ingest_time.alias("ingest_time"),
            reject["reason"].alias("reject_reason"),
            reject["detail"].alias("reject_detail"),
            (heartbeat & reject.isNull()).alias(HEARTBEAT_FIELD),
        ),
    )


@built_once
def _event_columns() -> list[Column]:
    """The ``EVENT_COLUMNS`` as columns, for selecting them."""
    return [F.col(name) for name in EVENT_COLUMNS]


@built_once
def _dead_letter_columns() -> list[Column]:
    return [F.col(name) for name in DEAD_LETTER_COLUMNS]


def valid_events(parsed: DataFrame) -> DataFrame:
    """Lines that are events (passed validation, not heartbeats), with the ``EVENT_COLUMNS`` only."""
    return parsed.where(f"reject_reason IS NULL AND NOT {HEARTBEAT_FIELD}").select(*_event_columns())


def rejected_lines(parsed: DataFrame) -> DataFrame:
    """Dead-letter rows: ``segment, line_number, raw_line, reject_reason, reject_detail``."""
    return parsed.where("reject_reason IS NOT NULL").select(*_dead_letter_columns())

"""The variant parser as it was before the clean path: the reference ``parse_events`` must equal.

A frozen copy (only ``parse_events`` and its helpers), kept for ``test_parse_equivalence``.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from shared.currencies import CURRENCY_CODES
from shared.events import AMOUNT_PRECISION, AMOUNT_SCALE, AMOUNT_TYPE, EVENT_TYPES, HEARTBEAT_FIELD, REQUIRED_FIELDS
from shared.expressions import built_once

_DECIMAL = r"^-?[0-9]+(\.[0-9]+)?$"
_DECIMAL_IN_RANGE = rf"^-?[0-9]{{1,{AMOUNT_PRECISION - AMOUNT_SCALE}}}(\.[0-9]{{1,{AMOUNT_SCALE}}})?$"
_ISO_TIMESTAMP = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,6})?(Z|[+-][0-9]{2}:[0-9]{2})$"


def _iso_timestamp(text: Column) -> Column:
    """Parse an ISO-8601 string with offset to UTC; null when it is not one."""
    return F.when(text.rlike(_ISO_TIMESTAMP), F.try_to_timestamp(text))


def _first_failure(checks: list[tuple[Column, str, str | None]]) -> Column:
    """``struct(reason, detail)`` of the first check that fails, null when none does
    (one ``CASE`` with a branch per check, in order)."""
    result = None
    for failed, name, field in checks:
        reason = F.struct(F.lit(name).alias("reason"), F.lit(field).cast("string").alias("detail"))
        result = F.when(failed, reason) if result is None else result.when(failed, reason)
    return result


def parse_events(raw: DataFrame) -> DataFrame:
    """Parse and validate log lines (``RAW_LINE_SCHEMA``) into typed events.

    Returns every input row with the ``EVENT_COLUMNS`` (null where not parseable) plus
    ``raw_line``, ``reject_reason``, ``reject_detail`` and ``heartbeat`` (true for a valid
    heartbeat line; of its columns only ``segment``, ``line_number`` and ``ingest_time`` mean
    anything).
    """
    parsed = raw
    for columns in _parse_stages():
        parsed = parsed.select(*columns)
    return parsed


@built_once
def _parse_stages() -> tuple[list[Column], ...]:
    """The column lists ``parse_events`` selects one after the other.

    Each stage names its results so that Spark evaluates every extraction once per row instead
    of once per check that uses it.
    """
    fields = REQUIRED_FIELDS + ("ingest_time",)
    variant = ["segment", "line_number", "raw_line", F.try_parse_json("raw_line").alias("_v")]
    located = [
        "segment",
        "line_number",
        "raw_line",
        F.col("_v").isNull().alias("_not_json"),
        # JSON that parsed is an object exactly when it opens with "{" after whitespace: a regex
        # is cheaper than the schema of the whole object
        F.col("raw_line").rlike("^\\s*[{]").alias("_is_object"),
        *[F.variant_get("_v", f"$.{name}", "variant").alias(f"_field_{name}") for name in fields],
        F.try_variant_get("_v", f"$.{HEARTBEAT_FIELD}", "variant").alias("_field_heartbeat"),
    ]
    extracted = [
        "segment",
        "line_number",
        "raw_line",
        "_not_json",
        "_is_object",
        "_field_heartbeat",
        *[F.try_variant_get(f"_field_{name}", "$", "string").alias(f"_text_{name}") for name in fields],
        *[F.schema_of_variant(f"_field_{name}").alias(f"_type_{name}") for name in fields],
        # a heartbeat is exactly the JSON value true (not "true", not 1)
        F.coalesce(
            (F.schema_of_variant("_field_heartbeat") == "BOOLEAN")
            & F.try_variant_get("_field_heartbeat", "$", "boolean"),
            F.lit(False),
        ).alias("_heartbeat"),
    ]
    text = {name: F.col(f"_text_{name}") for name in fields}
    kind = {name: F.col(f"_type_{name}") for name in fields}
    typed = [
        "*",
        F.when(text["amount"].rlike(_DECIMAL_IN_RANGE), text["amount"].cast(AMOUNT_TYPE)).alias("amount"),
        _iso_timestamp(text["event_time"]).alias("event_time"),
        _iso_timestamp(text["ingest_time"]).alias("ingest_time"),
    ]
    amount = F.col("amount")
    heartbeat = F.col("_heartbeat")
    ingest_present = kind["ingest_time"].isNotNull() & (kind["ingest_time"] != "VOID")
    checks: list[tuple[Column, str, str | None]] = [
        (F.trim(F.col("raw_line")) == "", "empty_line", None),
        (F.col("_not_json"), "not_json", None),
        (~F.col("_is_object"), "not_an_object", None),
        (heartbeat & ~ingest_present, "missing_field", "ingest_time"),
        (
            heartbeat & ((kind["ingest_time"] != "STRING") | F.col("ingest_time").isNull()),
            "invalid_ingest_time",
            "ingest_time",
        ),
    ]
    # past this point a heartbeat has passed every check that applies to it
    event = [(kind[name].isNull() | (kind[name] == "VOID"), "missing_field", name) for name in REQUIRED_FIELDS]
    event += [(kind[name] != "STRING", "wrong_type", name) for name in REQUIRED_FIELDS]
    event += [(F.trim(text[name]) == "", "missing_field", name) for name in REQUIRED_FIELDS]
    event += [
        (~text["event_type"].isin(*EVENT_TYPES), "invalid_event_type", "event_type"),
        (~text["amount"].rlike(_DECIMAL), "invalid_amount", "amount"),
        (amount.isNull(), "amount_out_of_range", "amount"),
        (
            ((text["event_type"] == "charge") & (amount <= 0)) | ((text["event_type"] == "refund") & (amount >= 0)),
            "amount_sign",
            "amount",
        ),
        (~text["currency"].isin(*CURRENCY_CODES), "invalid_currency", "currency"),
        (F.col("event_time").isNull(), "invalid_event_time", "event_time"),
        (
            ingest_present & ((kind["ingest_time"] != "STRING") | F.col("ingest_time").isNull()),
            "invalid_ingest_time",
            "ingest_time",
        ),
    ]
    checks += [(~heartbeat & failed, name, field) for failed, name, field in event]
    rejected = ["*", _first_failure(checks).alias("_reject")]
    result = [
        "segment",
        "line_number",
        *[text[name].alias(name) for name in ("event_id", "account_id", "event_type")],
        "amount",
        text["currency"].alias("currency"),
        "event_time",
        "ingest_time",
        "raw_line",
        F.col("_reject.reason").alias("reject_reason"),
        F.col("_reject.detail").alias("reject_detail"),
        (heartbeat & F.col("_reject").isNull()).alias(HEARTBEAT_FIELD),
    ]
    return variant, located, extracted, typed, rejected, result

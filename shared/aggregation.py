"""Per-window aggregation of billing events.

One row per ``(window_start, window_end, account_id, currency)`` with ``event_count`` and
``amount_total``. The sum is exact: ``amount`` is ``DECIMAL(20, 6)`` and the total is
``DECIMAL(38, 6)``, wide enough for 10^17 maximal amounts, so no total is ever rounded.
Currencies are never added together.

The rule is written once, in Arrow (``aggregate_windows_table``): the speed layer applies it to
a micro-batch, ``shared.batch_chain.window_totals`` runs it through Spark, all windows of an account
and currency in one call.
"""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql.types import DecimalType, LongType, StringType, StructField, StructType, TimestampType

from shared.events import AMOUNT_SCALE, UTC_MICROS

__all__ = [
    "AMOUNT_TOTAL_TYPE",
    "AMOUNT_TOTAL_ARROW_TYPE",
    "AGGREGATE_COLUMNS",
    "AGGREGATE_SCHEMA",
    "AGGREGATE_ARROW_SCHEMA",
    "WINDOW_KEY",
    "aggregate_windows_table",
]

AMOUNT_TOTAL_TYPE = DecimalType(38, AMOUNT_SCALE)
AMOUNT_TOTAL_ARROW_TYPE = pa.decimal128(38, AMOUNT_SCALE)

AGGREGATE_SCHEMA = StructType(
    [
        StructField("window_start", TimestampType(), False),
        StructField("window_end", TimestampType(), False),
        StructField("account_id", StringType(), False),
        StructField("currency", StringType(), False),
        StructField("event_count", LongType(), False),
        StructField("amount_total", AMOUNT_TOTAL_TYPE, False),
    ]
)
AGGREGATE_COLUMNS = tuple(AGGREGATE_SCHEMA.fieldNames())
WINDOW_KEY = AGGREGATE_COLUMNS[:4]
AGGREGATE_ARROW_SCHEMA = pa.schema(
    [
        pa.field("window_start", UTC_MICROS),
        pa.field("window_end", UTC_MICROS),
        pa.field("account_id", pa.string()),
        pa.field("currency", pa.string()),
        pa.field("event_count", pa.int64(), nullable=False),
        pa.field("amount_total", AMOUNT_TOTAL_ARROW_TYPE),
    ]
)


def aggregate_windows_table(windowed: pa.Table) -> pa.Table:
    """Count and sum the events of each window and key (input: ``assign_windows_table`` output)."""
    totals = (
        windowed.select([*WINDOW_KEY, "amount"])
        .group_by(list(WINDOW_KEY), use_threads=False)
        .aggregate([([], "count_all"), ("amount", "sum")])
    )
    return (
        totals.rename_columns({"count_all": "event_count", "amount_sum": "amount_total"})
        .select(list(AGGREGATE_COLUMNS))
        .cast(AGGREGATE_ARROW_SCHEMA)
    )

"""Per-window aggregation of billing events.

One row per ``(window_start, window_end, account_id, currency)`` with ``event_count`` and
``amount_total``. The sum is exact: ``amount`` is ``DECIMAL(20, 6)`` and the total is
``DECIMAL(38, 6)``, wide enough for 10^17 maximal amounts, so no total is ever rounded.
Currencies are never added together.

The rule is written once, in Arrow (``aggregate_windows_table``); ``aggregate_windows`` runs it
over a Spark DataFrame, all windows of an account and currency in one call.
"""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql.types import DecimalType, LongType, StringType, StructField, StructType, TimestampType

from shared.events import AMOUNT_SCALE
from shared.spark_arrow import per_key

__all__ = [
    "AMOUNT_TOTAL_TYPE",
    "AGGREGATE_COLUMNS",
    "AGGREGATE_SCHEMA",
    "AGGREGATE_ARROW_SCHEMA",
    "WINDOW_KEY",
    "aggregate_windows_table",
    "aggregate_windows",
]

AMOUNT_TOTAL_TYPE = DecimalType(38, AMOUNT_SCALE)

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
_TIME = pa.timestamp("us", tz="UTC")
AGGREGATE_ARROW_SCHEMA = pa.schema(
    [
        pa.field("window_start", _TIME),
        pa.field("window_end", _TIME),
        pa.field("account_id", pa.string()),
        pa.field("currency", pa.string()),
        pa.field("event_count", pa.int64(), nullable=False),
        pa.field("amount_total", pa.decimal128(38, AMOUNT_SCALE)),
    ]
)


def aggregate_windows_table(windowed: pa.Table) -> pa.Table:
    """Count and sum the events of each window and key (input: ``assign_windows_table`` output)."""
    totals = windowed.select([*WINDOW_KEY, "amount"]).group_by(list(WINDOW_KEY), use_threads=False).aggregate(
        [([], "count_all"), ("amount", "sum")]
    )
    return totals.rename_columns(
        {"count_all": "event_count", "amount_sum": "amount_total"}
    ).select(list(AGGREGATE_COLUMNS)).cast(AGGREGATE_ARROW_SCHEMA)


def aggregate_windows(windowed: DataFrame) -> DataFrame:
    """``aggregate_windows_table`` over a Spark DataFrame (``assign_windows`` output)."""
    return per_key(windowed, ["account_id", "currency"], aggregate_windows_table, AGGREGATE_SCHEMA)

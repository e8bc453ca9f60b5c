"""Per-window aggregation of billing events.

One row per ``(window_start, window_end, account_id, currency)`` with ``event_count`` and
``amount_total``. The sum is exact: ``amount`` is ``DECIMAL(20, 6)`` and the total is
``DECIMAL(38, 6)``, wide enough for 10^17 maximal amounts, so no total is ever rounded.
Currencies are never added together.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import DecimalType, LongType, StringType, StructField, StructType, TimestampType

from shared.events import AMOUNT_SCALE

__all__ = ["AMOUNT_TOTAL_TYPE", "AGGREGATE_COLUMNS", "AGGREGATE_SCHEMA", "aggregate_windows"]

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


def aggregate_windows(windowed: DataFrame) -> DataFrame:
    """Count and sum the events of each window and key (input: ``assign_windows`` output)."""
    return windowed.groupBy("window_start", "window_end", "account_id", "currency").agg(
        F.count(F.lit(1)).alias("event_count"),
        F.sum("amount").cast(AMOUNT_TOTAL_TYPE).alias("amount_total"),
    )

"""The bare PySpark job the batch recompute is measured against: the same windowed sums, nothing else.

``read.json`` of the log directory with the events' schema, rows without an id, a time or an
amount dropped, ``dropDuplicates(["event_id"])`` (an arbitrary copy, not the first in log
order), ``groupBy(window(event_time, size), account_id, currency)`` with ``count`` and an exact
``sum``, written as Parquet by Spark. No validation beyond what the JSON reader and the decimal
cast refuse, no dead letters, no line-level tables, no run record.

    .venv/bin/python benchmarks/bare_batch.py LOG_DIR OUT_DIR [--window-seconds 60]
"""

from __future__ import annotations

import argparse
import sys

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

LOG_SCHEMA = (
    "event_id string, account_id string, event_type string, amount string, currency string, event_time timestamp"
)


def bare_windows(spark: SparkSession, log_dir: str, window_seconds: int) -> DataFrame:
    return (
        spark.read.schema(LOG_SCHEMA)
        .json(log_dir)
        .withColumn("amount", F.col("amount").try_cast("decimal(20,6)"))
        .where(F.col("event_id").isNotNull() & F.col("amount").isNotNull() & F.col("event_time").isNotNull())
        .dropDuplicates(["event_id"])
        .groupBy(F.window("event_time", f"{window_seconds} seconds"), "account_id", "currency")
        .agg(F.count(F.lit(1)).alias("event_count"), F.sum("amount").cast("decimal(38,6)").alias("amount_total"))
        .select(
            F.col("window.start").alias("window_start"),
            F.col("window.end").alias("window_end"),
            "account_id",
            "currency",
            "event_count",
            "amount_total",
        )
    )


def run_bare(spark: SparkSession, log_dir: str, out_dir: str, window_seconds: int = 60) -> None:
    """The whole job: windows written as Parquet (overwriting ``out_dir``)."""
    bare_windows(spark, log_dir, window_seconds).write.mode("overwrite").parquet(out_dir)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("log_dir")
    parser.add_argument("out_dir")
    parser.add_argument("--window-seconds", type=int, default=60)
    parser.add_argument("--driver-memory", default="4g")
    args = parser.parse_args(argv)
    spark = (
        SparkSession.builder.master("local[*]")
        .appName("bare-batch")
        .config("spark.driver.memory", args.driver_memory)
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    run_bare(spark, args.log_dir, args.out_dir, args.window_seconds)
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())

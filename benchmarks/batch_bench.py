"""Batch recompute throughput against bare Spark doing the same aggregation, same process.

Baseline: plain Spark over the same segments — ``spark.read.text``, ``from_json``, a decimal
cast, ``groupBy(window(event_time, 1 minute), account_id, currency)`` with count and sum, and
the result handed to the same Delta writer (delta-rs) the lab uses. It keeps no dead letters,
does not deduplicate (retries are counted twice) and records nothing about lines. The lab's
``run_batch`` does the same windows with validation, dedup over the whole log, dead letters,
duplicates and its run record. A warm-up run of each comes first (JVM, Python workers).

    .venv/bin/python benchmarks/batch_bench.py [EVENTS]
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import time
from pathlib import Path

from deltalake import write_deltalake
from pyspark.sql import functions as F

from lklab.generator import GeneratorParams, generate
from shared.config import LabConfig
from shared.spark_session import spark_session
from spark_jobs.batch_job import run_batch


def bare_spark(spark, lake: Path, out: Path) -> int:
    schema = "event_id string, account_id string, event_type string, amount string, currency string, event_time timestamp"
    totals = (
        spark.read.text(str(lake / "log"))
        .select(F.from_json("value", schema).alias("e")).select("e.*")
        .withColumn("amount", F.col("amount").try_cast("decimal(20,6)"))
        .where(F.col("amount").isNotNull() & F.col("event_time").isNotNull())
        .groupBy(F.window("event_time", "1 minute"), "account_id", "currency")
        .agg(F.count(F.lit(1)).alias("event_count"), F.sum("amount").cast("decimal(38,6)").alias("amount_total"))
        .select("window.start", "window.end", "account_id", "currency", "event_count", "amount_total")
    ).toArrow()
    write_deltalake(str(out), totals, mode="overwrite")
    return totals.num_rows


def progress(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def main() -> None:
    events = int(sys.argv[1]) if len(sys.argv) > 1 else 300_000
    with tempfile.TemporaryDirectory() as scratch:
        lake = Path(scratch) / "lake"
        progress(f"generating {events:,} events")
        manifest = generate(GeneratorParams(events=events), lake, progress=progress).manifest
        config = LabConfig(lake=lake, table_engine="deltalake")
        spark = spark_session(config, "lklab-batch-bench")
        progress("warm-up: one run of each")
        bare_spark(spark, lake, Path(scratch) / "warm-bare")
        run_batch(spark, config)
        shutil.rmtree(lake / "tables")
        progress("measured: bare Spark")
        started = time.perf_counter()
        bare_windows = bare_spark(spark, lake, Path(scratch) / "bare")
        bare = time.perf_counter() - started
        progress("measured: lab batch recompute")
        started = time.perf_counter()
        run = run_batch(spark, config)
        ours = time.perf_counter() - started
        spark.stop()
    lines = manifest["lines"]
    print(f"log: {lines:,} lines ({manifest['events']:,} events, {manifest['duplicates']:,} retries), {manifest['segments']:,} segments")
    print(f"bare Spark (parse, groupBy(window, key), no dedup/validation): {bare:7.1f}s  {lines / bare:9,.0f} lines/s  {bare_windows:,} windows")
    print(f"lab batch recompute (validation, dedup, dead letters, runs):   {ours:7.1f}s  {lines / ours:9,.0f} lines/s  {run.windows:,} windows")
    print(f"ratio lab / bare Spark (time): {ours / bare:.2f}x")


if __name__ == "__main__":
    main()

"""Speed layer throughput against bare Spark doing the same windowed aggregation, same process.

Baseline: Spark's own streaming pipeline over the same segments — text file source (one segment
per micro-batch), ``from_json``, ``withWatermark`` + ``groupBy(window, account_id, currency)``
in append mode, to a no-op sink. It drops late rows silently and keeps no dead letters,
duplicates or side output. The lab's speed layer runs over the same log with the same windows
and watermark. Both use Trigger.AvailableNow and one segment per micro-batch, and both first run
once, unmeasured, over the whole log (the JVM's JIT, the Python workers and delta-rs warm
up; the lab's warm-up writes tables and a checkpoint of its own, ``warmup_*``).

    .venv/bin/python benchmarks/speed_bench.py [EVENTS] [SEGMENT_MINUTES]
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

from pyspark.sql import functions as F

from lklab.generator import GeneratorParams, generate
from shared.config import LabConfig
from shared.spark_session import spark_session
from spark_jobs.speed_job import run_speed


def bare_spark(spark, lake: Path, checkpoint: Path) -> None:
    schema = "event_id string, account_id string, event_type string, amount string, currency string, event_time timestamp"
    query = (
        spark.readStream.option("maxFilesPerTrigger", 1).text(str(lake / "log"))
        .select(F.from_json("value", schema).alias("e")).select("e.*")
        .withColumn("amount", F.col("amount").try_cast("decimal(20,6)"))
        .withWatermark("event_time", "1 minute")
        .groupBy(F.window("event_time", "1 minute"), "account_id", "currency")
        .agg(F.count(F.lit(1)).alias("event_count"), F.sum("amount").alias("amount_total"))
        .writeStream.format("noop").outputMode("append")
        .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start()
    )
    query.awaitTermination()


def main() -> None:
    events = int(sys.argv[1]) if len(sys.argv) > 1 else 20_000
    segment_minutes = int(sys.argv[2]) if len(sys.argv) > 2 else 30
    with tempfile.TemporaryDirectory() as scratch:
        lake = Path(scratch) / "lake"
        manifest = generate(GeneratorParams(events=events, segment_interval=segment_minutes * 60_000_000), lake).manifest
        config = LabConfig(lake=lake, table_engine="deltalake")
        spark = spark_session(config, "lklab-speed-bench")
        bare_spark(spark, lake, Path(scratch) / "warmup")
        run_speed(spark, config, available_now=True, app_id="warmup", prefix="warmup_")
        started = time.perf_counter()
        bare_spark(spark, lake, Path(scratch) / "bare")
        bare = time.perf_counter() - started
        started = time.perf_counter()
        run_speed(spark, config, available_now=True)
        ours = time.perf_counter() - started
        lines, segments = manifest["lines"], manifest["segments"]
        print(f"log: {lines:,} lines in {segments} segments (one micro-batch each)")
        print(f"bare Spark (withWatermark + groupBy, drops late rows): {bare:7.1f}s  {lines / bare:8,.0f} lines/s  {bare / segments:.2f}s/batch")
        print(f"lab speed layer (nothing dropped, exactly once):       {ours:7.1f}s  {lines / ours:8,.0f} lines/s  {ours / segments:.2f}s/batch")
        print(f"ratio (speed layer time / bare Spark time): {ours / bare:.2f}x")
        spark.stop()


if __name__ == "__main__":
    main()

"""Speed layer throughput against bare Spark doing the same windowed aggregation, same process.

Baseline: Spark's own streaming pipeline over the same segments — text file source (one segment
per micro-batch), ``from_json``, ``withWatermark`` + ``groupBy(window, account_id, currency)``
in append mode, to a no-op sink, with one shuffle partition (the speed layer works each
micro-batch in one piece on the driver). It drops late rows silently and keeps no dead letters,
duplicates or side output. The lab's speed layer runs over the same log with the same windows
and watermark, and commits its tables exactly once. Both use Trigger.AvailableNow and one
segment per micro-batch.

One unmeasured run of each over the whole log comes first (the JVM's JIT, the Python workers
and delta-rs warm up); then ``--repeats`` measured runs of each, interleaved (each with a
checkpoint and, for the lab, tables of its own), and the median of each side. On a shared
2-core machine single runs of the same code differ by up to ~20%: compare medians.

Two figures per side: the wall-clock time of a whole run (query start and stop included: the
lab's Python log source starts a Python process per query, ~2 s here), and the steady state:
the time of every micro-batch after the first, summed (Spark's ``triggerExecution``, which holds
everything a batch does, the lab's Delta commits included), and the lines those batches read
per second of it. That is what an always-on speed layer costs. (Segments differ in size: the
generator's log ends in a tail of small ones, so a median per batch would mostly weigh those.)

    .venv/bin/python benchmarks/speed_bench.py [--events N] [--segment-minutes M] [--repeats R] [--json-out FILE]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # measure this checkout, not the installed one

from pyspark.sql import functions as F  # noqa: E402

from lklab.pipelines.billing_windows.generator import GeneratorParams, generate  # noqa: E402
from lklab.pipelines.billing_windows.speed import run_speed  # noqa: E402
from shared.config import LabConfig  # noqa: E402
from shared.spark_session import spark_session  # noqa: E402


def progress(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def bare_spark(spark, lake: Path, checkpoint: Path) -> list:
    """Spark's own pipeline with one shuffle partition (with the session's shuffle partitions
    its stateful aggregate would run that many tasks and state stores per batch, slower for
    batches this small); returns the query's progress reports. The setting is fixed into the
    checkpoint when the query starts, so the session's is restored right after."""
    schema = (
        "event_id string, account_id string, event_type string, amount string, currency string, event_time timestamp"
    )
    partitions = spark.conf.get("spark.sql.shuffle.partitions")
    spark.conf.set("spark.sql.shuffle.partitions", "1")
    try:
        query = (
            spark.readStream.option("maxFilesPerTrigger", 1)
            .text(str(lake / "log"))
            .select(F.from_json("value", schema).alias("e"))
            .select("e.*")
            .withColumn("amount", F.col("amount").try_cast("decimal(20,6)"))
            .withWatermark("event_time", "1 minute")
            .groupBy(F.window("event_time", "1 minute"), "account_id", "currency")
            .agg(F.count(F.lit(1)).alias("event_count"), F.sum("amount").alias("amount_total"))
            .writeStream.format("noop")
            .outputMode("append")
            .option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True)
            .start()
        )
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", partitions)
    query.awaitTermination()
    return query.recentProgress


def steady_state(progress: list, batches: int) -> tuple[float, int]:
    """Seconds (``triggerExecution``, Spark's own figure) and input lines of the micro-batches
    after the first."""
    later = [p for p in progress if 0 < p["batchId"] < batches]
    if len(later) != batches - 1:
        raise RuntimeError(f"expected progress reports of batches 1..{batches - 1}, got {len(later)}")
    return sum(p["durationMs"]["triggerExecution"] for p in later) / 1000, sum(p["numInputRows"] for p in later)


def measured(action) -> tuple[float, list]:
    """Wall seconds of ``action`` and the progress reports of the query it ran."""
    started = time.perf_counter()
    progress = action()
    return time.perf_counter() - started, progress


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=20_000, help="events to generate (default 20,000)")
    parser.add_argument("--segment-minutes", type=int, default=30, help="event time per log segment (default 30)")
    parser.add_argument("--repeats", type=int, default=3, help="measured runs of each side; the median is reported")
    parser.add_argument("--json-out", default=None, help="also write the figures as JSON to this file")
    args = parser.parse_args(argv)
    if args.events < 1 or args.repeats < 1 or args.segment_minutes < 1:
        parser.error("--events, --segment-minutes and --repeats must be at least 1")

    with tempfile.TemporaryDirectory(prefix="speed-bench-") as scratch:
        lake = Path(scratch) / "lake"
        progress(f"generating {args.events:,} events")
        params = GeneratorParams(events=args.events, segment_interval=args.segment_minutes * 60_000_000)
        manifest = generate(params, lake).manifest
        lines, segments = manifest["lines"], manifest["segments"]
        config = LabConfig(lake=lake, table_engine="deltalake")
        spark = spark_session(config, "lklab-speed-bench")

        progress("warm-up: one unmeasured run of each")
        bare_spark(spark, lake, Path(scratch) / "bare-warmup")
        run_speed(spark, config, available_now=True, app_id="warmup", prefix="warmup_")

        runs = {"bare_spark": [], "lab_speed": []}
        for repeat in range(1, args.repeats + 1):
            name = f"run{repeat}"
            sides = {
                "bare_spark": lambda: bare_spark(spark, lake, Path(scratch) / f"bare-{repeat}"),
                "lab_speed": lambda: (
                    run_speed(spark, config, available_now=True, app_id=name, prefix=f"{name}_").progress
                ),
            }
            for side, action in sides.items():
                wall, progress_reports = measured(action)
                steady, steady_lines = steady_state(progress_reports, segments)
                runs[side].append((wall, steady, steady_lines))
                progress(f"run {repeat}/{args.repeats}: {side} {wall:.1f}s, batches after the first {steady:.1f}s")
        spark.stop()

    figures = {"log": {"lines": lines, "segments": segments}, "repeats": args.repeats}
    for side, side_runs in runs.items():
        walls, steadies = [w for w, _, _ in side_runs], [s for _, s, _ in side_runs]
        figures[side] = {
            "lines_after_first_batch": side_runs[0][2],
            "wall_seconds": walls,
            "median_wall_seconds": statistics.median(walls),
            "steady_seconds": steadies,
            "median_steady_seconds": statistics.median(steadies),
        }
    bare, ours = figures["bare_spark"], figures["lab_speed"]
    figures["wall_ratio_lab_to_bare"] = ours["median_wall_seconds"] / bare["median_wall_seconds"]
    figures["steady_ratio_lab_to_bare"] = ours["median_steady_seconds"] / bare["median_steady_seconds"]
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(figures, indent=2) + "\n")

    print(
        f"log: {lines:,} lines in {segments} segments (one micro-batch each); {args.repeats} measured run(s) of each, median"
    )
    for label, side in (
        ("bare Spark (withWatermark + groupBy, drops late rows)", bare),
        ("lab speed layer (nothing dropped, exactly once)", ours),
    ):
        wall, steady, steady_lines = (
            side["median_wall_seconds"],
            side["median_steady_seconds"],
            side["lines_after_first_batch"],
        )
        print(
            f"{label:55s} wall {wall:6.1f}s {lines / wall:7,.0f} lines/s | batches 1..{segments - 1}: {steady:5.1f}s {steady_lines / steady:7,.0f} lines/s"
        )
    print(
        f"ratio (speed layer / bare Spark): wall {figures['wall_ratio_lab_to_bare']:.2f}x, steady state {figures['steady_ratio_lab_to_bare']:.2f}x"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

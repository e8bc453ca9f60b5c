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
lab's Python log source starts a Python process per query: its first micro-batch came 1.0-1.3 s
after the start in a warm session, 1.5-2.4 s before ``lklab.worker_bytecode``), and the steady state:
the time of every micro-batch after the first, summed (Spark's ``triggerExecution``, which holds
everything a batch does, the lab's Delta commits included), and the lines those batches read
per second of it. That is what an always-on speed layer costs. (Segments differ in size: the
generator's log ends in a tail of small ones, so a median per batch would mostly weigh those.)

``--masters local[1],local[2]`` runs the whole comparison once per Spark master, each in a
session of its own, and prints the steady-state lines per second of each side per master and the
ratio of the last master's to the first's: how throughput grows with executors' cores (a
standalone cluster's ``spark://host:port`` is a master too).

``--dedup-scales 1,10`` then runs the lab's speed layer once per scale with the dedup horizon
``--dedup-horizon`` times the scale (the log's event time must span the largest, or the state
cannot grow with it: ``--span-hours``), and prints the largest state the stream kept
(``stream_metrics.state_rows``) and the peak resident memory of the driver process (this
Python process, where the driver step's state lives) and of the whole process tree.

``--speed-step executors`` runs the lab's speed layer with its step on the executors (the
``speed-step`` setting: ``shared.keyed_speed``); the baseline stays as it is.

    .venv/bin/python benchmarks/speed_bench.py [--events N] [--segment-minutes M] [--span-hours H] [--repeats R]
        [--masters M1,M2] [--dedup-horizon D] [--dedup-scales S1,S2] [--speed-step driver|executors]
        [--json-out FILE]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

import this_checkout  # noqa: E402, F401  (this checkout, in Spark's Python workers too)
from pyspark.sql import functions as F  # noqa: E402

from lklab.pipelines.billing_windows.generator import GeneratorParams, generate  # noqa: E402
from lklab.pipelines.billing_windows.speed import run_speed  # noqa: E402
from shared.config import SPEED_STEPS, LabConfig  # noqa: E402
from shared.durations import format_duration, parse_duration  # noqa: E402
from shared.spark_session import spark_session  # noqa: E402
from shared.tables import Tables  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from stream_runs import PeakMemory  # noqa: E402


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


def compare(config: LabConfig, scratch: Path, segments: int, repeats: int) -> dict:
    """One warm-up run of each side, then ``repeats`` measured runs of each, interleaved, in a
    session of ``config``'s master (stopped at the end): each side's walls, steady states and
    medians, and the ratios."""
    spark = spark_session(config, "lklab-speed-bench")
    lake = Path(config.lake)
    progress("warm-up: one unmeasured run of each")
    bare_spark(spark, lake, scratch / "bare-warmup")
    run_speed(spark, config, available_now=True, app_id="warmup", prefix=f"{scratch.name}_warmup_")
    runs = {"bare_spark": [], "lab_speed": []}
    for repeat in range(1, repeats + 1):
        name = f"{scratch.name}_run{repeat}"
        sides = {
            "bare_spark": lambda: bare_spark(spark, lake, scratch / f"bare-{repeat}"),
            "lab_speed": lambda: run_speed(spark, config, available_now=True, app_id=name, prefix=f"{name}_").progress,
        }
        for side, action in sides.items():
            wall, progress_reports = measured(action)
            steady, steady_lines = steady_state(progress_reports, segments)
            runs[side].append((wall, steady, steady_lines))
            progress(f"run {repeat}/{repeats}: {side} {wall:.1f}s, batches after the first {steady:.1f}s")
    spark.stop()
    figures = {}
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
    return figures


def state_memory(config: LabConfig, horizon: int, scales: list[int]) -> list[dict]:
    """Per scale: the speed layer over the whole log with the dedup horizon ``horizon`` (µs)
    times the scale, its largest state (``state_rows``) and the peak resident memory of the
    driver process and of the process tree meanwhile."""
    spark = spark_session(config, "lklab-speed-bench-state")
    run_speed(spark, config, available_now=True, app_id="state-warmup", prefix="state_warmup_")
    out = []
    for scale in scales:
        scaled = dataclasses.replace(config, dedup_horizon=horizon * scale)
        prefix = f"state_{scale}x_"
        with PeakMemory() as memory:
            run_speed(spark, scaled, available_now=True, app_id=f"state-{scale}x", prefix=prefix)
        metrics = Tables(spark, Path(config.lake), config.table_engine).read_arrow(prefix + "stream_metrics")
        out.append(
            {
                "scale": scale,
                "dedup_horizon": format_duration(horizon * scale),
                "largest_state_rows": max(v for v in metrics["state_rows"].to_pylist() if v is not None),
                "driver_rss_mib": memory.driver / 2**20,
                "tree_rss_mib": memory.tree / 2**20,
            }
        )
        progress(f"dedup horizon x{scale}: {out[-1]}")
    spark.stop()
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=20_000, help="events to generate (default 20,000)")
    parser.add_argument("--segment-minutes", type=int, default=30, help="event time per log segment (default 30)")
    parser.add_argument("--repeats", type=int, default=3, help="measured runs of each side; the median is reported")
    parser.add_argument("--span-hours", type=int, default=6, help="event time the log spans (default 6)")
    parser.add_argument(
        "--masters", default="local[2]", help="Spark masters to compare, comma-separated (default local[2])"
    )
    parser.add_argument("--dedup-horizon", default="30m", help="the dedup horizon at scale 1 (default 30m)")
    parser.add_argument(
        "--dedup-scales", default="", help="also: the state at these multiples of the horizon, e.g. 1,10"
    )
    parser.add_argument(
        "--speed-step",
        choices=SPEED_STEPS,
        default="driver",
        help="where the lab speed layer's step runs (the speed-step setting; default driver)",
    )
    parser.add_argument("--json-out", default=None, help="also write the figures as JSON to this file")
    args = parser.parse_args(argv)
    if args.events < 1 or args.repeats < 1 or args.segment_minutes < 1 or args.span_hours < 1:
        parser.error("--events, --segment-minutes, --span-hours and --repeats must be at least 1")

    masters = [m.strip() for m in args.masters.split(",") if m.strip()]
    scales = [int(v) for v in args.dedup_scales.split(",") if v.strip()] if args.dedup_scales else []
    with tempfile.TemporaryDirectory(prefix="speed-bench-") as scratch:
        lake = Path(scratch) / "lake"
        progress(f"generating {args.events:,} events over {args.span_hours} h")
        params = GeneratorParams(
            events=args.events, segment_interval=args.segment_minutes * 60_000_000, span=args.span_hours * 3_600_000_000
        )
        manifest = generate(params, lake).manifest
        lines, segments = manifest["lines"], manifest["segments"]
        figures = {
            "log": {"lines": lines, "segments": segments},
            "repeats": args.repeats,
            "speed_step": args.speed_step,
            "masters": {},
        }
        for master in masters:
            config = LabConfig(lake=lake, table_engine="deltalake", spark_master=master, speed_step=args.speed_step)
            progress(f"master {master}")
            tag = re.sub(r"[^A-Za-z0-9]+", "_", master).strip("_")  # a table prefix and a lock's name
            figures["masters"][master] = compare(config, Path(scratch) / tag, segments, args.repeats)
        if scales:
            figures["dedup_scales"] = state_memory(
                LabConfig(lake=lake, table_engine="deltalake", spark_master=masters[-1], speed_step=args.speed_step),
                parse_duration(args.dedup_horizon),
                scales,
            )
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(figures, indent=2) + "\n")

    print(
        f"log: {lines:,} lines in {segments} segments (one micro-batch each); {args.repeats} measured run(s) of each, median; "
        f"the lab's step on the {args.speed_step}"
    )
    for master, sides in figures["masters"].items():
        print(f"master {master}:")
        for label, side in (
            ("bare Spark (withWatermark + groupBy, drops late rows)", sides["bare_spark"]),
            ("lab speed layer (nothing dropped, exactly once)", sides["lab_speed"]),
        ):
            wall, steady, steady_lines = (
                side["median_wall_seconds"],
                side["median_steady_seconds"],
                side["lines_after_first_batch"],
            )
            print(
                f"  {label:55s} wall {wall:6.1f}s {lines / wall:7,.0f} lines/s | batches 1..{segments - 1}: {steady:5.1f}s {steady_lines / steady:7,.0f} lines/s"
            )
        print(
            f"  ratio (speed layer / bare Spark): wall {sides['wall_ratio_lab_to_bare']:.2f}x, steady state {sides['steady_ratio_lab_to_bare']:.2f}x"
        )
    if len(masters) > 1:
        first, last = figures["masters"][masters[0]], figures["masters"][masters[-1]]
        for side in ("bare_spark", "lab_speed"):
            grown = first[side]["median_steady_seconds"] / last[side]["median_steady_seconds"]
            print(f"{side}: steady-state lines/s on {masters[-1]} / on {masters[0]}: {grown:.2f}x")
    for scale in figures.get("dedup_scales", []):
        print(
            f"dedup horizon {scale['dedup_horizon']} ({scale['scale']}x): largest state {scale['largest_state_rows']:,} rows; "
            f"peak RSS: driver {scale['driver_rss_mib']:,.0f} MiB, process tree {scale['tree_rss_mib']:,.0f} MiB"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())

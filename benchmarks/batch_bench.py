"""Batch recompute throughput against bare Spark doing the same windowed sums, same process.

Both read the same generated log (``billing``, 1% retries, 0.1% malformed lines).

* Bare Spark (``bare_batch.py``): ``read.json`` over the log directory, rows without an id, a
  time or an amount dropped, ``dropDuplicates(["event_id"])``, ``groupBy(window(event_time,
  size), account_id, currency)`` with ``count`` and ``sum``, written as Parquet by Spark. No
  validation beyond that, no dead letters, no line-level tables, no run record.
* The lab: ``run_batch`` over every day: parse and validate every line, dedup over the whole
  log (the first copy in log order), windows, aggregation, ``batch_truth`` plus the line-level
  tables (``batch_dead_letter``, ``batch_duplicates``) and the ``batch_runs`` record. Its tables
  are deleted before each run (outside the timing): a second run over the same log would skip
  the idempotent writes.

One unmeasured run of each over the whole log comes first (JVM, JIT, Python workers, page
cache); then ``--repeats`` measured runs of each, interleaved, and the median of each side: wall
seconds, and CPU seconds of the process tree (the JVM with its local executors, the Python
workers), which a busy machine disturbs much less.
Throughput is log lines per second (both read every line) and real events per second (the
generator's count of distinct valid events). ``batch_process_bench.py`` measures the same two
jobs each as its own process.

    .venv/bin/python benchmarks/batch_bench.py [--events N] [--repeats R] [--scratch DIR] [--json-out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import time
from pathlib import Path

import this_checkout  # noqa: E402, F401  (this checkout, in Spark's Python workers too)
from pyspark.sql import SparkSession  # noqa: E402

from lklab.pipelines.billing_windows.batch import run_batch  # noqa: E402
from lklab.pipelines.billing_windows.generator import GeneratorParams, generate  # noqa: E402
from shared.batch_runs import BatchRun  # noqa: E402
from shared.catalog import tables_root  # noqa: E402
from shared.compute_cost import measure_cost  # noqa: E402
from shared.config import LabConfig  # noqa: E402
from shared.eventlog import EventLog  # noqa: E402
from shared.spark_session import spark_session  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bare_batch import run_bare  # noqa: E402
from scratch_dir import scratch_dir  # noqa: E402


def progress(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def bare_spark(spark: SparkSession, log_dir: Path, window_seconds: int, out: Path) -> None:
    """Plain Spark: JSON lines -> dedup -> per-window count and sum -> Parquet."""
    run_bare(spark, str(log_dir), str(out), window_seconds)


def lab_batch(spark: SparkSession, config: LabConfig) -> BatchRun:
    """``run_batch`` on a lake without tables, so every write really happens."""
    shutil.rmtree(tables_root(config.lake), ignore_errors=True)
    return run_batch(spark, config, whole_log=True)


def timed(action):
    """Wall seconds, CPU seconds of this process tree (the JVM with its local executors, the
    Python workers: a busy machine disturbs them much less than the wall time) and the result."""
    with measure_cost() as cost:
        result = action()
    return cost.wall_seconds, cost.cpu_seconds, result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000, help="events to generate (default 1,000,000)")
    parser.add_argument("--repeats", type=int, default=3, help="measured runs of each side; the median is reported")
    parser.add_argument(
        "--scratch", default=None, help="directory for the temporary lake (default: the system's temp dir)"
    )
    parser.add_argument("--json-out", default=None, help="also write the figures as JSON to this file")
    args = parser.parse_args(argv)
    if args.events < 1 or args.repeats < 1:
        parser.error("--events and --repeats must be at least 1")

    with scratch_dir("batch-bench-", args.scratch) as scratch:
        lake = Path(scratch) / "lake"
        progress(f"generating {args.events:,} events")
        manifest = generate(GeneratorParams(events=args.events), lake, progress=progress).manifest
        config = LabConfig(lake=lake, table_engine="deltalake")
        window_seconds = config.window_size // 1_000_000  # the lab's window
        log_dir = EventLog(lake).root
        spark = spark_session(config, "lklab-batch-bench")

        progress("warm-up: one unmeasured run of each")
        bare_spark(spark, log_dir, window_seconds, Path(scratch) / "bare")
        lab_batch(spark, config)

        bare_seconds, lab_seconds, bare_cpu, lab_cpu = [], [], [], []
        for repeat in range(1, args.repeats + 1):
            seconds, cpu, _ = timed(lambda: bare_spark(spark, log_dir, window_seconds, Path(scratch) / "bare"))
            bare_windows = spark.read.parquet(str(Path(scratch) / "bare")).count()
            bare_seconds.append(seconds)
            bare_cpu.append(cpu)
            progress(
                f"run {repeat}/{args.repeats}: bare Spark {seconds:.1f}s, cpu {cpu:.1f}s ({bare_windows:,} windows; load {os.getloadavg()[0]:.1f})"
            )
            seconds, cpu, run = timed(lambda: lab_batch(spark, config))
            lab_seconds.append(seconds)
            lab_cpu.append(cpu)
            progress(
                f"run {repeat}/{args.repeats}: lab batch {seconds:.1f}s, cpu {cpu:.1f}s ({run.windows:,} windows; load {os.getloadavg()[0]:.1f})"
            )
        spark.stop()

    lines, events = manifest["lines"], manifest["events"]
    bare, ours = statistics.median(bare_seconds), statistics.median(lab_seconds)
    bare_cpu_median, lab_cpu_median = statistics.median(bare_cpu), statistics.median(lab_cpu)
    figures = {
        "log": {
            "lines": lines,
            "events": events,
            "retries": manifest["duplicates"],
            "malformed": sum(manifest["dead_letters"].values()),
            "segments": manifest["segments"],
        },
        "repeats": args.repeats,
        "bare_spark": {
            "seconds": bare_seconds,
            "median_seconds": bare,
            "cpu_seconds": bare_cpu,
            "median_cpu_seconds": bare_cpu_median,
            "lines_per_second": lines / bare,
            "events_per_second": events / bare,
            "windows": bare_windows,
        },
        "lab_batch": {
            "seconds": lab_seconds,
            "median_seconds": ours,
            "cpu_seconds": lab_cpu,
            "median_cpu_seconds": lab_cpu_median,
            "lines_per_second": lines / ours,
            "events_per_second": events / ours,
            "windows": run.windows,
            "conserved": run.conserved,
        },
        "time_ratio_lab_to_bare": ours / bare,
        "cpu_ratio_lab_to_bare": lab_cpu_median / bare_cpu_median,
    }
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(figures, indent=2) + "\n")

    print(
        f"log: {lines:,} lines ({events:,} events, {manifest['duplicates']:,} retries, "
        f"{figures['log']['malformed']:,} malformed), {manifest['segments']:,} segments; "
        f"{args.repeats} measured run(s) of each, median"
    )
    print(
        f"bare Spark (read.json, dropDuplicates, groupBy(window, key)):      {bare:7.1f}s  "
        f"{lines / bare:9,.0f} lines/s  {events / bare:9,.0f} events/s  {bare_windows:,} windows  cpu {bare_cpu_median:.1f}s"
    )
    print(
        f"lab batch recompute (validation, dedup, dead letters, run record):   {ours:7.1f}s  "
        f"{lines / ours:9,.0f} lines/s  {events / ours:9,.0f} events/s  {run.windows:,} windows  cpu {lab_cpu_median:.1f}s"
    )
    print(
        f"ratio lab / bare Spark: wall {ours / bare:.2f}x, cpu {lab_cpu_median / bare_cpu_median:.2f}x; "
        f"load average at the end {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

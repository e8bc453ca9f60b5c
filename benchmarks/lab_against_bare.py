"""The run both pipeline benchmarks make: the lab's batch truth and stream against bare Spark's.

``payments_bench.py`` and ``visitors_bench.py`` differ in the log they generate, in what bare
Spark computes and in what they check afterwards; the rest is this module:

* ``bench_arguments``: the command line (``--events``, ``--segment-minutes``, ``--repeats``,
  ``--scratch``, ``--json-out``), every count at least 1;
* ``run_to_end``: bare Spark's streaming query written to Parquet in append mode with
  ``Trigger.AvailableNow`` and one shuffle partition (the lab steps each micro-batch in one piece
  on the driver); the session's setting is restored once the query has started, since the
  checkpoint fixes it then;
* ``run_four_jobs``: one temporary lake with the generated log, one Spark session, the four jobs
  measured by ``stream_runs.measure_jobs`` (the lab's batch on a lake without its tables, so
  every write really happens), then the benchmark's check on the last run of each;
* ``print_report``: the figures (``stream_runs.ratio_figures``, written to ``--json-out``) and
  their lines: the log, the timings, the benchmark's agreement lines, the load.
"""

from __future__ import annotations

import argparse
import os
import shutil
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from scratch_dir import scratch_dir  # noqa: E402
from stream_runs import (
    Measured,
    ProgressReports,
    measure_jobs,
    order_for_file_source,
    print_load,
    print_timings,
    progress,
    ratio_figures,
)

from shared.catalog import tables_root
from shared.config import LabConfig
from shared.spark_session import spark_session

__all__ = ["BenchRun", "bench_arguments", "print_report", "run_four_jobs", "run_to_end"]


def bench_arguments(
    argv: list[str] | None, description: str, events_default: int, events_help: str
) -> argparse.Namespace:
    """The benchmark's arguments; exits 2 with a message when a count is below 1."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--events", type=int, default=events_default, help=events_help)
    parser.add_argument(
        "--segment-minutes", type=int, default=10, help="ingest time per log segment, one micro-batch each (default 10)"
    )
    parser.add_argument(
        "--repeats", type=int, default=1, help="measured runs of each job; the median is reported (default 1)"
    )
    parser.add_argument(
        "--scratch", default=None, help="directory for the temporary lake (default: the system's temp dir)"
    )
    parser.add_argument("--json-out", default=None, help="also write the figures as JSON to this file")
    args = parser.parse_args(argv)
    if args.events < 1 or args.repeats < 1 or args.segment_minutes < 1:
        parser.error("--events, --segment-minutes and --repeats must be at least 1")
    return args


def run_to_end(spark: SparkSession, query: DataFrame, checkpoint: Path, out: Path) -> None:
    """Bare Spark's streaming ``query`` to Parquet at ``out``, to its end (``AvailableNow``)."""
    partitions = spark.conf.get("spark.sql.shuffle.partitions")
    spark.conf.set("spark.sql.shuffle.partitions", "1")
    try:
        started = (
            query.writeStream.format("parquet")
            .outputMode("append")
            .option("path", str(out))
            .option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True)
            .start()
        )
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", partitions)
    started.awaitTermination()


@dataclass(frozen=True)
class BenchRun:
    """What ``run_four_jobs`` measured: the generator's manifest, the log's segments, the lines
    read by the micro-batches after the first, the measured runs, the check's figures and the
    1-minute load average when it started."""

    manifest: dict
    segments: int
    steady_lines: int
    measured: Measured
    agreement: dict
    load_at_start: float


Check = Callable[[SparkSession, LabConfig, Path, Path, Path, Path, list, str], dict]


def run_four_jobs(
    args: argparse.Namespace,
    *,
    pipeline: str,
    name: str,
    generate: Callable[[Path], dict],
    bare_batch: Callable[[SparkSession, Path, LabConfig, Path], None],
    bare_stream: Callable[[SparkSession, Path, LabConfig, Path, Path], None],
    batch_tables: Iterable,
    run_batch: Callable,
    run_speed: Callable,
    check: Check,
    checking: str,
) -> BenchRun:
    """Generate the log (``generate(lake)`` returns its manifest), measure bare Spark's and the
    lab's batch and stream jobs on it, and ``check(spark, config, scratch, bare_batch_out,
    bare_stream_out, bare_stream_checkpoint, bare_stream_reports, lab_prefix)`` the last runs."""
    load_at_start = os.getloadavg()[0]
    with scratch_dir(f"{name}-bench-", args.scratch) as scratch_path:
        scratch = Path(scratch_path)
        lake = scratch / "lake"
        manifest = generate(lake)
        log_dir = lake / "log"
        segments = order_for_file_source(log_dir)
        steady_lines = manifest["lines"] - sum(
            1 for _ in segments[0].open("rb")
        )  # the lines of the batches after the first
        config = LabConfig(lake=lake, table_engine="deltalake", pipeline=pipeline)
        spark = spark_session(config, f"lklab-{name}-bench")
        reports = ProgressReports(spark)

        def lab_batch(run: str):
            for table in batch_tables:
                shutil.rmtree(tables_root(config.lake) / table.name, ignore_errors=True)
            return run_batch(spark, config, whole_log=True)

        jobs = {
            "bare_batch": lambda run: bare_batch(spark, log_dir, config, scratch / "bare-batch"),
            "lab_batch": lab_batch,
            "bare_stream": lambda run: bare_stream(
                spark, log_dir, config, scratch / f"bare-{run}" / "checkpoint", scratch / f"bare-{run}" / "out"
            ),
            "lab_stream": lambda run: run_speed(spark, config, available_now=True, app_id="bench", prefix=f"{run}_"),
        }
        measured = measure_jobs(jobs, args.repeats, reports)
        progress(checking)
        last = f"run{args.repeats}"
        agreement = check(
            spark,
            config,
            scratch,
            scratch / "bare-batch",
            scratch / f"bare-{last}" / "out",
            scratch / f"bare-{last}" / "checkpoint",
            measured.reports["bare_stream"],
            f"{last}_",
        )
        spark.stop()
    return BenchRun(manifest, len(segments), steady_lines, measured, agreement, load_at_start)


def print_report(
    args: argparse.Namespace, run: BenchRun, log: dict[str, int], labels: dict[str, str], agreement: list[str]
) -> int:
    """Print (and write) the figures of ``run``: ``log`` counts what the log holds besides its
    lines, malformed lines and segments (``{"views": ...}``), ``labels`` name the four jobs,
    ``agreement`` are the lines saying what the check found."""
    lines = run.manifest["lines"]
    figures = ratio_figures(
        args,
        {"lines": lines, **log, "malformed": sum(run.manifest["dead_letters"].values()), "segments": run.segments},
        run.measured,
        run.agreement,
        run.load_at_start,
    )
    held = ", ".join(f"{figures['log'][name]:,} {name}" for name in [*log, "malformed"])
    print(
        f"log: {lines:,} lines ({held}), {run.segments} segments (one micro-batch each); {args.repeats} measured run(s) of each, median"
    )
    print_timings(figures, lines, run.steady_lines, labels)
    for line in agreement:
        print(line)
    print_load(figures, run.load_at_start)
    return 0

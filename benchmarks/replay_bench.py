"""Kappa replay against the batch recompute on the same log, and the live layer against bare Spark.

1. **Replay vs batch.** One generated log (``billing``, 1,000,000 events by default, 1% retries,
   0.1% malformed lines), the lab's two ways of reading all of it: ``run_batch`` (the truth) and
   ``run_replay`` (the stream's rows, exactly as a live run writes them). Both in one Spark
   session: one unmeasured run of each first (JVM, JIT, Python workers), then ``--repeats``
   measured runs of each, interleaved; the median of each, events per second, and the ratio.
   ``--processes`` also times ``lklab batch`` and ``lklab replay`` as separate processes (JVM
   start included), as an operator runs them.
2. **Live layer vs bare Spark** (unless ``--no-live``): ``benchmarks/speed_bench.py``'s
   comparison (Spark's ``withWatermark`` + ``groupBy`` over the same segments, one per
   micro-batch, against the lab's speed layer), on its own smaller log: the steady-state cost per
   micro-batch of each and the ratio.

    .venv/bin/python benchmarks/replay_bench.py [--events N] [--repeats R] [--processes] [--no-live] [--json-out FILE]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import this_checkout  # noqa: E402, F401  (this checkout, in Spark's Python workers too)
from scratch_dir import scratch_dir  # noqa: E402

from lklab.pipelines.billing_windows.batch import run_batch  # noqa: E402
from lklab.pipelines.billing_windows.generator import GeneratorParams, generate  # noqa: E402
from lklab.pipelines.billing_windows.replay import run_replay  # noqa: E402
from shared.catalog import BATCH_TABLES, tables_root  # noqa: E402
from shared.config import LabConfig  # noqa: E402
from shared.spark_session import spark_session  # noqa: E402


def load() -> str:
    """The machine's load averages (1, 5, 15 minutes): the figures beside them were measured on a shared machine."""
    return "load {:.2f} {:.2f} {:.2f}".format(*os.getloadavg())


def progress(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message} ({load()})", file=sys.stderr, flush=True)


def timed(action):
    started = time.perf_counter()
    result = action()
    return time.perf_counter() - started, result


def batch(spark, config: LabConfig):
    """``run_batch`` on a lake without batch tables, so every write really happens."""
    for table in BATCH_TABLES:
        shutil.rmtree(tables_root(config.lake) / table.name, ignore_errors=True)
    return run_batch(spark, config, whole_log=True)


def as_processes(lake: Path) -> dict[str, float]:
    """Wall seconds of ``lklab batch`` and ``lklab replay`` as separate processes."""
    lklab = str(Path(sys.executable).parent / "lklab")
    env = {**os.environ, "LKLAB_LAKE": str(lake), "LKLAB_TABLE_ENGINE": "deltalake"}
    seconds = {}
    for side, argv in (
        ("batch", [lklab, "batch", "--refresh", "--whole-log"]),
        ("replay", [lklab, "replay", "--name", "process", "--replace"]),
    ):
        wall, done = timed(lambda: subprocess.run(argv, env=env, capture_output=True, text=True))
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)} exited {done.returncode}: {done.stderr[-2000:]}")
        seconds[side] = wall
        progress(f"process: lklab {side} {wall:.1f}s")
    return seconds


def live_against_bare_spark(repeats: int) -> dict:
    """``speed_bench.py``'s comparison, its figures as it writes them."""
    spec = importlib.util.spec_from_file_location("speed_bench", Path(__file__).with_name("speed_bench.py"))
    speed_bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(speed_bench)
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        speed_bench.main(["--repeats", str(repeats), "--json-out", out.name])
        return json.loads(Path(out.name).read_text())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000, help="events to generate (default 1,000,000)")
    parser.add_argument("--repeats", type=int, default=3, help="measured runs of each side; the median is reported")
    parser.add_argument("--processes", action="store_true", help="also time lklab batch and lklab replay as processes")
    parser.add_argument("--no-live", action="store_true", help="skip the live layer against bare Spark")
    parser.add_argument(
        "--scratch", default=None, help="directory for the temporary lake (default: the system's temp dir)"
    )
    parser.add_argument("--json-out", default=None, help="also write the figures as JSON to this file")
    args = parser.parse_args(argv)
    if args.events < 1 or args.repeats < 1:
        parser.error("--events and --repeats must be at least 1")

    with scratch_dir("replay-bench-", args.scratch) as scratch:
        lake = Path(scratch) / "lake"
        progress(f"generating {args.events:,} events")
        manifest = generate(GeneratorParams(events=args.events), lake, progress=progress).manifest
        config = LabConfig(lake=lake, table_engine="deltalake")
        spark = spark_session(config, "lklab-replay-bench")

        progress("warm-up: one unmeasured run of each")
        batch(spark, config)
        run_replay(spark, config, "warmup")

        seconds = {"batch": [], "replay": []}
        for repeat in range(1, args.repeats + 1):
            wall, run = timed(lambda: batch(spark, config))
            seconds["batch"].append(wall)
            progress(f"run {repeat}/{args.repeats}: batch recompute {wall:.1f}s (cpu {run.cpu_seconds:.1f}s)")
            wall, replayed = timed(lambda: run_replay(spark, config, "bench", replace=True))
            seconds["replay"].append(wall)
            progress(
                f"run {repeat}/{args.repeats}: replay {wall:.1f}s (cpu {replayed.cpu_seconds:.1f}s, {replayed.segments:,} segments)"
            )
        spark.stop()
        processes = as_processes(lake) if args.processes else None

    events, lines = manifest["events"], manifest["lines"]
    medians = {side: statistics.median(values) for side, values in seconds.items()}
    figures = {
        "log": {"lines": lines, "events": events, "segments": manifest["segments"]},
        "repeats": args.repeats,
        "seconds": seconds,
        "median_seconds": medians,
        "events_per_second": {side: events / value for side, value in medians.items()},
        "ratio_replay_to_batch": medians["replay"] / medians["batch"],
        "load_average_at_end": list(os.getloadavg()),
    }
    if processes:
        figures["process_seconds"] = processes
        figures["process_ratio_replay_to_batch"] = processes["replay"] / processes["batch"]
    if not args.no_live:
        progress("live layer against bare Spark (speed_bench.py)")
        figures["live"] = live_against_bare_spark(args.repeats)
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(figures, indent=2) + "\n")

    print(
        f"log: {lines:,} lines ({events:,} events), {manifest['segments']:,} segments; {args.repeats} measured run(s) of each, median; {load()} at the end"
    )
    for side, label in (("batch", "batch recompute (the truth)"), ("replay", "Kappa replay (the stream's rows)")):
        print(f"{label:35s} {medians[side]:7.1f}s  {events / medians[side]:9,.0f} events/s")
    print(f"ratio replay / batch (time): {figures['ratio_replay_to_batch']:.2f}x")
    if processes:
        print(
            f"as processes: lklab batch {processes['batch']:.1f}s, lklab replay {processes['replay']:.1f}s, "
            f"ratio {figures['process_ratio_replay_to_batch']:.2f}x"
        )
    if not args.no_live:
        live = figures["live"]
        bare, lab = live["bare_spark"], live["lab_speed"]
        batches = live["log"]["segments"] - 1
        print(
            f"live layer, steady state per micro-batch: bare Spark {bare['median_steady_seconds'] / batches:.3f}s, "
            f"lab {lab['median_steady_seconds'] / batches:.3f}s, ratio {live['steady_ratio_lab_to_bare']:.2f}x "
            f"(wall {live['wall_ratio_lab_to_bare']:.2f}x)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""``lklab batch`` against the bare PySpark job, each as its own process, on one generated log.

What a nightly scheduler runs: a process that starts its JVM, reads the day's log and writes
the result. The lab side is ``lklab batch --lake L`` (validation, first-copy dedup, windows,
``batch_truth``, the line-level tables and the run record; its tables are deleted before each
run, outside the timing). The bare side is ``benchmarks/bare_batch.py`` (``read.json``, rows
without id/time/amount dropped, ``dropDuplicates``, ``groupBy(window, account, currency)``,
Parquet). Both get the same driver memory. Runs are interleaved, ``--repeats`` of each, and the
medians are compared: wall time, and the CPU seconds of each process with everything it started
(the JVM, Python workers), which a busy machine disturbs much less than the wall time; the
1-minute load average before and after each run is printed too. ``--baseline-checkout DIR`` adds
a third side in the same interleaving: another checkout's ``lklab batch`` (e.g. an older commit).

    .venv/bin/python benchmarks/batch_process_bench.py [--events N] [--repeats R] [--lake DIR]
        [--baseline-checkout DIR] [--json-out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from generated_log import generated_log  # noqa: E402
from process_runs import timed_run  # noqa: E402

from shared.catalog import tables_root  # noqa: E402


def progress(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def timed_process(argv: list[str], env: dict[str, str], cwd: str) -> tuple[float, float, float, float]:
    """Wall seconds and CPU seconds of one process and every process it started, and the load
    average before and after it (``process_runs.timed_run``)."""
    run = timed_run(argv, env, cwd)
    return run.seconds, run.cpu_seconds, run.load_before, run.load_after


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000, help="events to generate (default 1,000,000)")
    parser.add_argument("--repeats", type=int, default=3, help="runs of each side; the median is reported")
    parser.add_argument("--lake", default=None, help="reuse this lake's log (generated there if it has none)")
    parser.add_argument(
        "--baseline-checkout", default=None, help="also run this checkout's lklab batch (e.g. an older commit)"
    )
    parser.add_argument("--json-out", default=None)
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="batch-process-bench-") as scratch:
        lake = Path(args.lake) if args.lake else Path(scratch) / "lake"
        manifest = generated_log(lake, args.events, progress)
        env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
        lab = [
            sys.executable,
            "-m",
            "lklab.cli",
            "batch",
            "--whole-log",
            "--lake",
            str(lake),
            "--table-engine",
            "deltalake",
        ]
        bare = [
            sys.executable,
            str(REPO / "benchmarks" / "bare_batch.py"),
            str(lake / "log"),
            str(Path(scratch) / "bare"),
        ]
        sides = {"lab": (lab, str(REPO)), "bare": (bare, str(REPO))}
        if args.baseline_checkout:
            sides["baseline"] = (lab, args.baseline_checkout)
        runs: dict[str, list[tuple[float, float, float, float]]] = {side: [] for side in sides}
        for repeat in range(1, args.repeats + 1):
            for side, (argv, checkout) in sides.items():
                shutil.rmtree(tables_root(lake), ignore_errors=True)
                runs[side].append(timed_process(argv, {**env, "PYTHONPATH": checkout}, checkout))
                seconds, cpu, before, after = runs[side][-1]
                progress(
                    f"run {repeat}/{args.repeats}: {side} {seconds:.1f}s, cpu {cpu:.1f}s (load {before:.1f} -> {after:.1f})"
                )

    medians = {side: statistics.median(r[0] for r in rows) for side, rows in runs.items()}
    cpu = {side: statistics.median(r[1] for r in rows) for side, rows in runs.items()}
    figures = {
        "log": {"lines": manifest["lines"], "events": manifest["events"], "segments": manifest["segments"]},
        "runs": {
            side: [dict(zip(("seconds", "cpu_seconds", "load_before", "load_after"), r)) for r in rows]
            for side, rows in runs.items()
        },
        "median_seconds": medians,
        "median_cpu_seconds": cpu,
        "ratio_lab_to_bare": medians["lab"] / medians["bare"],
        "cpu_ratio_lab_to_bare": cpu["lab"] / cpu["bare"],
        "cores": os.cpu_count(),
    }
    if args.baseline_checkout:
        figures["ratio_baseline_to_bare"] = medians["baseline"] / medians["bare"]
        figures["cpu_ratio_baseline_to_bare"] = cpu["baseline"] / cpu["bare"]
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(figures, indent=2) + "\n")
    print(
        f"log: {manifest['lines']:,} lines ({manifest['events']:,} events), {manifest['segments']:,} segments; "
        f"{args.repeats} run(s) of each process, interleaved, median; {os.cpu_count()} cores"
    )
    labels = {"bare": "bare PySpark job", "lab": "lklab batch", "baseline": f"lklab batch at {args.baseline_checkout}"}
    for side in runs:
        loads = ", ".join(f"{b:.1f}->{a:.1f}" for _, _, b, a in runs[side])
        print(
            f"{labels[side]}: wall {medians[side]:.1f}s, cpu {cpu[side]:.1f}s   "
            f"runs: {', '.join(f'{s:.1f}' for s, *_ in runs[side])}   load: {loads}"
        )
    for side in [s for s in runs if s != "bare"]:
        print(
            f"ratio {labels[side]} / bare: wall {medians[side] / medians['bare']:.2f}x, cpu {cpu[side] / cpu['bare']:.2f}x"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())

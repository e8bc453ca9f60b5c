"""``lklab batch`` against the bare PySpark job, each as its own process, on one generated log.

What a nightly scheduler runs: a process that starts its JVM, reads the day's log and writes
the result. The lab side is ``lklab batch --lake L`` (validation, first-copy dedup, windows,
``batch_truth``, the line-level tables and the run record; its tables are deleted before each
run, outside the timing). The bare side is ``benchmarks/bare_batch.py`` (``read.json``, rows
without id/time/amount dropped, ``dropDuplicates``, ``groupBy(window, account, currency)``,
Parquet). Both get the same driver memory. Runs are interleaved, ``--repeats`` of each, and the
medians are compared; the 1-minute load average before and after each run is printed, since a
busy machine slows whichever side runs while it is busy.

    .venv/bin/python benchmarks/batch_process_bench.py [--events N] [--repeats R] [--lake DIR] [--json-out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from lklab.generator import GeneratorParams, generate  # noqa: E402

BIN = Path(sys.executable).parent


def progress(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def timed_process(argv: list[str], env: dict[str, str]) -> tuple[float, float, float]:
    """Wall seconds of one process, and the load average before and after it."""
    before = os.getloadavg()[0]
    started = time.perf_counter()
    done = subprocess.run(argv, env=env, cwd=REPO, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{argv[0]} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return seconds, before, os.getloadavg()[0]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000, help="events to generate (default 1,000,000)")
    parser.add_argument("--repeats", type=int, default=3, help="runs of each side; the median is reported")
    parser.add_argument("--lake", default=None, help="reuse this lake's log (generated there if it has none)")
    parser.add_argument("--json-out", default=None)
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="batch-process-bench-") as scratch:
        lake = Path(args.lake) if args.lake else Path(scratch) / "lake"
        if not (lake / "log").is_dir():
            progress(f"generating {args.events:,} events into {lake}")
            generate(GeneratorParams(events=args.events), lake, progress=progress)
        manifest = json.loads((lake / "generator" / "manifest.json").read_text())
        env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
        lab = [str(BIN / "lklab"), "batch", "--lake", str(lake), "--table-engine", "deltalake"]
        bare = [sys.executable, str(REPO / "benchmarks" / "bare_batch.py"), str(lake / "log"), str(Path(scratch) / "bare")]
        runs: dict[str, list[tuple[float, float, float]]] = {"lab": [], "bare": []}
        for repeat in range(1, args.repeats + 1):
            shutil.rmtree(lake / "tables", ignore_errors=True)
            runs["lab"].append(timed_process(lab, env))
            runs["bare"].append(timed_process(bare, env))
            for side in ("lab", "bare"):
                seconds, before, after = runs[side][-1]
                progress(f"run {repeat}/{args.repeats}: {side} {seconds:.1f}s (load {before:.1f} -> {after:.1f})")

    medians = {side: statistics.median(r[0] for r in rows) for side, rows in runs.items()}
    figures = {
        "log": {"lines": manifest["lines"], "events": manifest["events"], "segments": manifest["segments"]},
        "runs": {side: [{"seconds": s, "load_before": b, "load_after": a} for s, b, a in rows] for side, rows in runs.items()},
        "median_seconds": medians,
        "ratio_lab_to_bare": medians["lab"] / medians["bare"],
        "cores": os.cpu_count(),
    }
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(figures, indent=2) + "\n")
    print(f"log: {manifest['lines']:,} lines ({manifest['events']:,} events), {manifest['segments']:,} segments; "
          f"{args.repeats} run(s) of each process, median; {os.cpu_count()} cores")
    for side, label in (("bare", "bare PySpark job (process)"), ("lab", "lklab batch (process)")):
        loads = ", ".join(f"{b:.1f}->{a:.1f}" for _, b, a in runs[side])
        print(f"{label:28s} {medians[side]:6.1f}s   runs: {', '.join(f'{s:.1f}' for s, _, _ in runs[side])}   load: {loads}")
    print(f"ratio lklab batch / bare (time): {figures['ratio_lab_to_bare']:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The nightly pair (batch recompute, then reconciliation) on a Spark standalone cluster of 1 and 2 workers.

One lake is built locally (``stream_from_truth``: a ``billing`` log and speed-layer tables with
known late events, retries and unread segments). For each cluster size a master and that many
one-core workers are started from the pip installation (``spark-class``), and the two commands
run against it as a scheduler would run them, each its own process:
``lklab batch --spark-master spark://...`` (every day, from a lake without batch tables) and
``lklab reconcile --spark-master spark://...``. The wall time of each is printed, with the
reconciliation's unexplained events (which must be 0). Executors read the log and write the
tables' files themselves; the driver plans, commits and gets back only small results, so the
work spreads over the workers while the driver's memory does not grow with the log.

    .venv/bin/python benchmarks/cluster_bench.py [--events N] [--accounts A] [--workers 1,2] [--json-out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from stream_from_truth import LakeShape, build_lake  # noqa: E402

from reconciliation.tables import CORRECTED_AGGREGATES, RECON_CORRECTIONS, RECON_DIFFS, RECON_RUNS  # noqa: E402
from shared.catalog import BATCH_TABLES, tables_root  # noqa: E402
from shared.config import LabConfig  # noqa: E402
from shared.spark_session import spark_session  # noqa: E402
from tests.processes import VENV_BIN, free_port, start, stop_all, venv_env, wait_until  # noqa: E402


def progress(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def alive_workers(ui: int) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{ui}/json/", timeout=5) as response:
            return json.loads(response.read()).get("aliveworkers", 0)
    except OSError:
        return 0


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, str]:
    started = time.perf_counter()
    done = subprocess.run(argv, env=env, cwd=REPO, capture_output=True, text=True, timeout=3600)
    seconds = time.perf_counter() - started
    if done.returncode not in (0, 3):
        raise SystemExit(f"{' '.join(argv[:2])} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return seconds, done.stdout


def on_cluster(lake: Path, workers: int, scratch: Path) -> dict:
    """Start a master and ``workers`` one-core workers, run the pair, stop them."""
    port, ui = free_port(), free_port()
    env = venv_env({"SPARK_LOCAL_IP": "127.0.0.1"})
    spark_class = str(VENV_BIN / "spark-class")
    logs = scratch / f"cluster-{workers}"
    services = [
        start(
            "master",
            [
                spark_class,
                "org.apache.spark.deploy.master.Master",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--webui-port",
                str(ui),
            ],
            env=env,
            log_dir=logs,
        )
    ]
    try:
        for number in range(1, workers + 1):
            services.append(
                start(
                    f"worker-{number}",
                    [
                        spark_class,
                        "org.apache.spark.deploy.worker.Worker",
                        "--host",
                        "127.0.0.1",
                        "--cores",
                        "1",
                        "--memory",
                        "3g",
                        "--webui-port",
                        str(free_port()),
                        "--work-dir",
                        str(logs / f"work-{number}"),
                        f"spark://127.0.0.1:{port}",
                    ],
                    env=env,
                    log_dir=logs,
                )
            )
        wait_until(
            lambda: alive_workers(ui) == workers, timeout=120, what=f"{workers} ALIVE workers", services=services
        )
        for table in (*BATCH_TABLES, RECON_DIFFS, RECON_RUNS, RECON_CORRECTIONS, CORRECTED_AGGREGATES):
            shutil.rmtree(tables_root(lake) / table.name, ignore_errors=True)
        common = ["--lake", str(lake), "--table-engine", "deltalake", "--spark-master", f"spark://127.0.0.1:{port}"]
        run_env = venv_env({"SPARK_LOCAL_IP": "127.0.0.1"})
        progress(f"{workers} worker(s): lklab batch")
        batch_seconds, _ = timed([str(VENV_BIN / "lklab"), "batch", "--whole-log", *common], run_env)
        progress(f"{workers} worker(s): lklab reconcile")
        reconcile_seconds, out = timed([str(VENV_BIN / "lklab"), "reconcile", *common, "--json"], run_env)
        result = json.loads(out)
        return {
            "workers": workers,
            "batch_seconds": batch_seconds,
            "reconcile_seconds": reconcile_seconds,
            "unexplained_events": result["unexplained_events"],
            "load_after": os.getloadavg()[0],
        }
    finally:
        stop_all(services)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=300_000)
    parser.add_argument("--accounts", type=int, default=5_000)
    parser.add_argument("--workers", default="1,2", help="cluster sizes to run, comma-separated (default 1,2)")
    parser.add_argument("--json-out", default=None)
    args = parser.parse_args(argv)
    sizes = [int(n) for n in args.workers.split(",")]

    with tempfile.TemporaryDirectory(prefix="cluster-bench-") as scratch:
        lake = Path(scratch) / "lake"
        spark = spark_session(LabConfig(lake=lake, table_engine="deltalake"), "lklab-cluster-bench-build")
        built = build_lake(spark, lake, LakeShape(events=args.events, accounts=args.accounts), progress)
        spark.stop()
        results = [on_cluster(lake, workers, Path(scratch)) for workers in sizes]

    figures = {"lake": built.__dict__, "runs": results, "cores": os.cpu_count()}
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(figures, indent=2, default=str) + "\n")
    print(
        f"lake: {built.lines:,} log lines in {built.segments:,} segments; truth {built.truth_windows:,} windows, "
        f"stream {built.stream_windows:,} windows; machine: {os.cpu_count()} cores"
    )
    for r in results:
        print(
            f"{r['workers']} worker(s) x 1 core: lklab batch {r['batch_seconds']:6.1f}s, lklab reconcile "
            f"{r['reconcile_seconds']:6.1f}s, unexplained events {r['unexplained_events']} (load after {r['load_after']:.1f})"
        )
    return 0 if all(r["unexplained_events"] == 0 for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())

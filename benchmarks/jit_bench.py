"""One-job commands with C1 alone against both compilers (the JVM's default), as processes.

``lklab batch --whole-log``, ``lklab replay`` and ``lklab reconcile --against kappa:<replay>`` on
one generated log, each its own process, timed twice a round: with
``SPARK_SUBMIT_OPTS=-XX:TieredStopAtLevel=1`` (C1 alone: what ``shared.jvm_compilers`` gives a
reconcile, and a batch or a replay of a log under its ``SMALL_LOG_BYTES``) and with
``-XX:TieredStopAtLevel=4`` (C1 then C2, the JVM's default). A tier named there is the one the
command runs with. The two alternate, first one then the other; each batch rewrites its tables
from the whole log, each replay writes a run of its own and the reconcile compares the batch
with it. Wall and CPU seconds of each process and everything it started
(``process_runs.timed_run``), medians over the rounds, and the ratios C1 alone / both.

    .venv/bin/python benchmarks/jit_bench.py [--events N] [--rounds R] [--lake DIR] [--json-out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from generated_log import generated_log  # noqa: E402
from process_runs import timed_run  # noqa: E402

COMPILERS = {"C1 alone": "-XX:TieredStopAtLevel=1", "C1 and C2": "-XX:TieredStopAtLevel=4"}
COMMANDS = ("batch", "replay", "reconcile")


def progress(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def argv_of(command: str, lake: Path, run: str) -> list[str]:
    lab = [sys.executable, "-m", "lklab.cli"]
    given = {
        "batch": ["batch", "--whole-log", "--refresh"],
        "replay": ["replay", "--name", run],
        "reconcile": ["reconcile", "--against", f"kappa:{run}"],
    }[command]
    return [*lab, *given, "--lake", str(lake), "--table-engine", "deltalake"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=200_000, help="events to generate (default 200,000)")
    parser.add_argument("--rounds", type=int, default=2, help="rounds of each command with each compiler setting")
    parser.add_argument("--lake", default=None, help="use this lake's log (generated there if it has none)")
    parser.add_argument("--json-out", default=None)
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="jit-bench-") as scratch:
        lake = Path(args.lake) if args.lake else Path(scratch) / "lake"
        manifest = generated_log(lake, args.events, progress)
        env = {k: v for k, v in os.environ.items() if k != "SPARK_SUBMIT_OPTS"}
        env.update({"PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable, "PYTHONPATH": str(REPO)})
        runs = {(c, s): [] for c in COMMANDS for s in COMPILERS}
        for number in range(1, args.rounds + 1):
            order = list(COMPILERS) if number % 2 else list(COMPILERS)[::-1]
            for setting in order:
                setting_env = {**env, "SPARK_SUBMIT_OPTS": COMPILERS[setting]}
                name = f"jit{number}tier{COMPILERS[setting][-1]}"  # a replay of its own
                for command in COMMANDS:
                    run = timed_run(argv_of(command, lake, name), setting_env, str(REPO), ok=(0, 3))
                    runs[command, setting].append(run)
                    progress(
                        f"round {number}/{args.rounds}: {command} with {setting}: {run.seconds:.1f}s, "
                        f"cpu {run.cpu_seconds:.1f}s (load {run.load_before:.1f} -> {run.load_after:.1f})"
                    )

    def median(command: str, setting: str, field: str) -> float:
        return statistics.median(getattr(r, field) for r in runs[command, setting])

    figures = {
        "log": {"lines": manifest["lines"], "events": manifest["events"], "segments": manifest["segments"]},
        "rounds": args.rounds,
        "cores": os.cpu_count(),
        "commands": {
            command: {
                setting: {
                    "median_seconds": median(command, setting, "seconds"),
                    "median_cpu_seconds": median(command, setting, "cpu_seconds"),
                    "seconds": [r.seconds for r in runs[command, setting]],
                    "cpu_seconds": [r.cpu_seconds for r in runs[command, setting]],
                }
                for setting in COMPILERS
            }
            for command in COMMANDS
        },
    }
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(figures, indent=2) + "\n")
    print(
        f"log: {manifest['lines']:,} lines ({manifest['events']:,} events), {manifest['segments']:,} segments; "
        f"{args.rounds} round(s) of each command with each setting, alternating, medians; {os.cpu_count()} cores"
    )
    for command in COMMANDS:
        one, both = (figures["commands"][command][s] for s in COMPILERS)
        print(
            f"lklab {command}: C1 alone {one['median_seconds']:.1f}s (cpu {one['median_cpu_seconds']:.1f}s), "
            f"C1 and C2 {both['median_seconds']:.1f}s (cpu {both['median_cpu_seconds']:.1f}s): "
            f"wall {one['median_seconds'] / both['median_seconds']:.2f}x, "
            f"cpu {one['median_cpu_seconds'] / both['median_cpu_seconds']:.2f}x"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())

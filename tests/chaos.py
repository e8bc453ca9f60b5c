"""Chaos: the lab's four writing jobs killed with SIGKILL at random moments, then run again.

One small generated lake is copied twice. On the reference copy the four jobs run once each,
uninterrupted: the speed layer over the whole log, the batch recompute, a Kappa replay and a
reconciliation. On the chaos copy each job is started and killed (SIGKILL to its whole process
group, the JVM included) at a random moment of its run, ``--kills`` times in all across the four
jobs, and then run to completion. Every table of the two lakes must then hold the same rows
(as multisets), apart from the run-history tables (one row per execution: the chaos lake has
more executions) and columns that record when or how long something ran.

    .venv/bin/python -m tests.chaos [--kills 20] [--seed 1] [--events 3000]

``tests/test_chaos.py`` runs a short version in the test suite.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from deltalake import DeltaTable

LKLAB = str(Path(sys.executable).parent / "lklab")
JOBS = {
    "speed": ["speed", "--available-now"],
    "batch": ["batch"],
    "replay": ["replay", "--name", "chaos"],
    "reconcile": ["reconcile"],
}
HISTORY = {"batch_runs", "replay_runs"}  # one row per execution
WHEN = {"duration_seconds", "recorded_at", "wall_seconds", "cpu_seconds", "run_id"}  # when / how long / which execution


@dataclass
class Chaos:
    """What a chaos run did and found."""

    kills: Counter = field(default_factory=Counter)
    killed_before_exit: Counter = field(default_factory=Counter)
    tables: dict[str, int] = field(default_factory=dict)
    differences: list[str] = field(default_factory=list)


def _environment(lake: Path) -> dict[str, str]:
    env = {**os.environ, "LKLAB_LAKE": str(lake), "LKLAB_TABLE_ENGINE": "deltalake", "PYSPARK_PYTHON": sys.executable}
    env.pop("LKLAB_CRASH_AT", None)
    return env


def _run(lake: Path, job: str, kill_after: float | None = None) -> tuple[int, str]:
    """Run ``job``; with ``kill_after`` seconds, SIGKILL its process group then (if still alive)."""
    process = subprocess.Popen([LKLAB, *JOBS[job]], env=_environment(lake), start_new_session=True,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        if kill_after is None:
            _, errors = process.communicate(timeout=900)
            return process.returncode, errors
        try:
            process.wait(timeout=kill_after)
        except subprocess.TimeoutExpired:
            pass
        return process.poll() if process.poll() is not None else -signal.SIGKILL, ""
    finally:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        process.wait()


def _finish(lake: Path, job: str) -> None:
    code, errors = _run(lake, job)
    if job == "replay" and code == 2 and "already exists" in errors:
        return  # a killed replay had already recorded its run: done
    if code != 0:
        raise RuntimeError(f"lklab {job} exited {code} on the chaos lake:\n{errors[-3000:]}")


def _rows(lake: Path) -> dict[str, Counter]:
    tables = {}
    root = lake / "tables"
    for log_dir in sorted(root.rglob("_delta_log")):
        name = str(log_dir.parent.relative_to(root))
        if name in HISTORY:
            continue
        rows = DeltaTable(str(log_dir.parent)).to_pyarrow_dataset().to_table().to_pylist()
        tables[name] = Counter(tuple((k, str(v)) for k, v in sorted(row.items()) if k not in WHEN) for row in rows)
    return tables


def chaos(kills: int, seed: int, events: int, scratch: Path, say=print) -> Chaos:
    from lklab.generator import GeneratorParams, generate

    chooser = random.Random(seed)
    template = scratch / "template"
    generate(GeneratorParams(events=events, accounts=6, seed=seed, span=2 * 3_600_000_000, segment_interval=10 * 60_000_000,
                             duplicate_rate=0.02, malformed_rate=0.01), template)
    reference, wrecked = scratch / "reference", scratch / "chaos"
    for copy in (reference, wrecked):
        shutil.copytree(template, copy)
    durations = {}
    for job in JOBS:
        started = time.monotonic()
        _finish(reference, job)
        durations[job] = time.monotonic() - started
        say(f"reference: lklab {job} {durations[job]:.0f}s")
    result = Chaos()
    plan = Counter(chooser.choice(list(JOBS)) for _ in range(kills))
    for job in JOBS:
        for attempt in range(plan[job]):
            moment = chooser.uniform(0.0, durations[job] * 1.1)
            code, _ = _run(wrecked, job, kill_after=moment)
            result.kills[job] += 1
            result.killed_before_exit[job] += int(code == -signal.SIGKILL)
            say(f"chaos: lklab {job} killed after {moment:.1f}s ({'killed' if code == -signal.SIGKILL else f'had exited {code}'})")
        _finish(wrecked, job)
        say(f"chaos: lklab {job} run to completion")
    expected, found = _rows(reference), _rows(wrecked)
    result.tables = {name: sum(rows.values()) for name, rows in expected.items()}
    for name in sorted(expected.keys() | found.keys()):
        if expected.get(name) != found.get(name):
            missing = sum((expected.get(name, Counter()) - found.get(name, Counter())).values())
            extra = sum((found.get(name, Counter()) - expected.get(name, Counter())).values())
            result.differences.append(f"{name}: {missing} row(s) missing, {extra} extra")
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=20, help="SIGKILLs across the four jobs (default 20)")
    parser.add_argument("--seed", type=int, default=1, help="random seed: which jobs, at which moments (default 1)")
    parser.add_argument("--events", type=int, default=3000, help="events in the generated log (default 3,000)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="lklab-chaos-") as scratch:
        result = chaos(args.kills, args.seed, args.events, Path(scratch))
    print(f"killed: {dict(result.kills)} (still running when killed: {dict(result.killed_before_exit)})")
    print(f"checked {len(result.tables)} tables, {sum(result.tables.values()):,} rows: "
          + ("all equal to the uninterrupted run" if not result.differences else "DIFFERENT"))
    for line in result.differences:
        print(f"  {line}")
    return 1 if result.differences else 0


if __name__ == "__main__":
    sys.exit(main())

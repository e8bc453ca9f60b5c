"""Chaos: the lab's four writing jobs killed with SIGKILL at random moments, then run again.

One small generated lake is copied twice. On the reference copy the four jobs run once each,
uninterrupted: the speed layer over the whole log, the batch recompute, a Kappa replay and a
reconciliation. On the chaos copy each job is started and killed (SIGKILL to its whole process
group, the JVM included) at a random moment of its work, then run to completion. Every table of
the two lakes must then hold the same rows (as multisets), apart from the run-history tables
(one row per execution: the chaos lake has more executions) and columns that record when or how
long something ran.

The moment is counted from the job's first write to the lake (its locks aside) and drawn from
the time the job's uninterrupted run went on writing (from its first write to its end): a batch,
a replay or a reconcile reads and computes for most of its run and writes in its last seconds,
and a kill before its first write finds nothing to recover (drawn over a whole process's run,
two of the short version's four kills fell in its first 3 seconds, while Python and the JVM were
starting). A kill counts only when it interrupted the job while it ran: an attempt that finds
the job already finished is counted apart, its work is undone (the lake is put back as it was
before that attempt, so no later kill hits a rerun of a finished job) and the moment is drawn
again, within the time that attempt took from its first write. ``--kills`` are shared out over
the four jobs as evenly as they go (the rest to jobs drawn at random), so from four kills on
every job is killed at least once. The summary says how many kills interrupted each job, in how
many attempts, and which tables and rows were compared; the script fails when fewer kills than
asked interrupted a job.

    .venv/bin/python -m tests.chaos --kills 20 [--seed 1] [--events 3000]

``tests/test_chaos.py`` runs a short version in the test suite (one kill per job), and there
the runs to completion on the chaos lake that follow the kills are ``lklab.cli.main`` called in
the tests' process, in its Spark session (``chaos(..., spark=...)``): the same command line,
locks and exit codes on the lake the kills left, in another JVM than the killed ones', as a new
process's would be, without a JVM start each; so are the reference runs. The killed attempts
are processes in both.
"""

from __future__ import annotations

import argparse
import io
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass, field
from pathlib import Path

from deltalake import DeltaTable

from shared.micro_batch import TIMING_COLUMNS

LKLAB = str(Path(sys.executable).parent / "lklab")
JOBS = {
    "speed": ["speed", "--available-now"],
    "batch": ["batch"],
    "replay": ["replay", "--name", "chaos"],
    "reconcile": ["reconcile"],
}
HISTORY = ("batch_runs", "replay_runs")  # one row per execution
# when / how long / which execution (a metrics row's step time and live latency: TIMING_COLUMNS)
WHEN = (*sorted(TIMING_COLUMNS), "recorded_at", "wall_seconds", "cpu_seconds", "run_id")
MAX_MISSES = 5  # per job: attempts that found the job finished before its kill
WRITE_POLL = 0.05  # seconds between looks at the lake for a job's first write


@dataclass
class Chaos:
    """What a chaos run did and found: per job, the kills that interrupted it while it ran
    (``kills``) and every attempt (``attempts``, including those that found it exited); rows per
    table compared; the tables whose rows differ from the uninterrupted run's."""

    kills: Counter = field(default_factory=Counter)
    attempts: Counter = field(default_factory=Counter)
    tables: dict[str, int] = field(default_factory=dict)
    differences: list[str] = field(default_factory=list)

    def summary(self) -> list[str]:
        """What was killed and what was checked, for the console."""
        per_job = ", ".join(f"{job} {self.kills[job]} in {self.attempts[job]} attempt(s)" for job in JOBS)
        missed = sum(self.attempts.values()) - sum(self.kills.values())
        return [
            f"{sum(self.kills.values())} kills interrupted a running job ({per_job}); "
            f"{missed} attempt(s) found the job finished and were undone",
            f"checked {len(self.tables)} tables, {sum(self.tables.values()):,} rows, against the uninterrupted run's rows "
            "as multisets: " + ("all equal" if not self.differences else "DIFFERENT"),
            "  " + ", ".join(f"{name} {rows:,}" for name, rows in sorted(self.tables.items())),
            f"  not compared: {', '.join(HISTORY)} (one row per execution); columns {', '.join(WHEN)}",
            *(f"  {line}" for line in self.differences),
        ]


def _environment(lake: Path) -> dict[str, str]:
    env = {**os.environ, "LKLAB_LAKE": str(lake), "LKLAB_TABLE_ENGINE": "deltalake", "PYSPARK_PYTHON": sys.executable}
    env.pop("LKLAB_CRASH_AT", None)
    return env


def _start(lake: Path, job: str, stderr) -> subprocess.Popen:
    return subprocess.Popen(
        [LKLAB, *JOBS[job]],
        env=_environment(lake),
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=stderr,
        text=True,
    )


def _end(process: subprocess.Popen) -> None:
    """SIGKILL what is left of the job's process group (the JVM of a killed driver included)."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    process.wait()


def _run(lake: Path, job: str) -> tuple[int, str]:
    """Run ``job`` to the end: its exit code and what it printed on stderr."""
    process = _start(lake, job, subprocess.PIPE)
    try:
        _, errors = process.communicate(timeout=900)
        return process.returncode, errors
    finally:
        _end(process)


def _run_here(lake: Path, job: str) -> tuple[int, str]:
    """Run ``job`` to the end as ``lklab.cli.main`` in this process, in the Spark session running
    here (``command_session`` uses it and leaves it running), with a process's environment: its
    exit code and what it printed on stderr."""
    from lklab.cli import main
    from tests.conftest import cli_in_this_process

    output, errors = io.StringIO(), io.StringIO()
    with cli_in_this_process():
        os.environ.update(_environment(lake))
        os.environ.pop("LKLAB_CRASH_AT", None)
        with redirect_stdout(output), redirect_stderr(errors):
            return main(list(JOBS[job])), errors.getvalue()


def _written(lake: Path) -> frozenset[tuple[str, int, int]]:
    """Every file and directory under ``lake`` but its locks (taken before a job's work), with
    its modification time and size: what a job's first write changes."""
    seen = set()
    for directory, subdirectories, files in os.walk(lake):
        if directory == str(lake):
            subdirectories[:] = [name for name in subdirectories if name != "locks"]
        for name in (*subdirectories, *files):
            path = os.path.join(directory, name)
            try:
                stat = os.lstat(path)
            except FileNotFoundError:  # removed meanwhile (a temporary file of the job's)
                continue
            seen.add((path, stat.st_mtime_ns, stat.st_size))
    return frozenset(seen)


class _FirstWrite:
    """The moment of the first write to ``lake`` (``_written`` changed) from now, seen by a
    thread that looks every ``WRITE_POLL`` seconds: ``at``, None while there is none."""

    def __init__(self, lake: Path) -> None:
        self.lake, self.before, self.at = lake, _written(lake), None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        while not self._stop.wait(WRITE_POLL):
            if _written(self.lake) != self.before:
                self.at = time.monotonic()
                return

    def close(self) -> None:
        self._stop.set()
        self._thread.join()


def _attempt(lake: Path, job: str, kill_after: float, errors: Path) -> tuple[int, float]:
    """Start ``job`` and SIGKILL its process group ``kill_after`` seconds after its first write
    to the lake: ``-SIGKILL`` when that interrupted it, else the code it exited with on its own
    (its stderr in ``errors``); and the seconds it ran from its first write (0 when it wrote
    nothing)."""
    first_write = _FirstWrite(lake)
    with errors.open("w") as stderr:
        process = _start(lake, job, stderr)
        try:
            while process.poll() is None and first_write.at is None:
                time.sleep(WRITE_POLL)
            if first_write.at is None:
                return process.returncode, 0.0
            left = kill_after - (time.monotonic() - first_write.at)
            return process.wait(timeout=max(left, 0.0)), time.monotonic() - first_write.at
        except subprocess.TimeoutExpired:
            return -signal.SIGKILL, kill_after  # still running: _end interrupts it
        finally:
            _end(process)
            first_write.close()


def _restore(snapshot: Path, lake: Path) -> None:
    shutil.rmtree(lake)
    shutil.copytree(snapshot, lake)


def _finish(lake: Path, job: str, here: bool = False) -> float:
    """Run ``job`` on ``lake`` to the end: as a process, or ``here`` (``_run_here``). The seconds
    it wrote for: from its first write to the lake to its end (0 when it wrote nothing)."""
    first_write = _FirstWrite(lake)
    try:
        code, errors = _run_here(lake, job) if here else _run(lake, job)
    finally:
        first_write.close()
    if job == "replay" and code == 2 and "pass --replace" in errors:  # ReplayExists
        return 0.0  # an attempt not killed in time had recorded the replay: done
    if code != 0:
        raise RuntimeError(f"lklab {job} exited {code} on the chaos lake:\n{errors[-3000:]}")
    return 0.0 if first_write.at is None else time.monotonic() - first_write.at


def _plan(kills: int, chooser: random.Random) -> Counter:
    """Kills per job: as even as they go, the rest to distinct jobs drawn at random."""
    plan = Counter({job: kills // len(JOBS) for job in JOBS})
    plan.update(chooser.sample(list(JOBS), kills % len(JOBS)))
    return plan


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


def chaos(kills: int, seed: int, events: int, scratch: Path, say=print, segment_minutes: int = 10, spark=None) -> Chaos:
    """``events`` over two hours of event time, in segments of ``segment_minutes`` (the speed
    layer reads one per micro-batch). With ``spark``, the active session of this process, each
    job's reference run and its run to completion after its kills are ``lklab.cli.main`` called
    here, in that session (``_run_here``); the killed attempts are processes either way."""
    from lklab.pipelines.billing_windows.generator import GeneratorParams, generate

    chooser = random.Random(seed)
    template = scratch / "template"
    generate(
        GeneratorParams(
            events=events,
            accounts=6,
            seed=seed,
            span=2 * 3_600_000_000,
            segment_interval=segment_minutes * 60_000_000,
            duplicate_rate=0.02,
            malformed_rate=0.01,
        ),
        template,
    )
    reference, wrecked = scratch / "reference", scratch / "chaos"
    for copy in (reference, wrecked):
        shutil.copytree(template, copy)
    durations = {}
    for job in JOBS:
        started = time.monotonic()
        durations[job] = _finish(reference, job, here=spark is not None)
        say(
            f"reference: lklab {job} {time.monotonic() - started:.0f}s, {durations[job]:.1f}s of it from its first write"
            + (" (in this process)" if spark is not None else "")
        )
    result = Chaos()
    plan = _plan(kills, chooser)
    snapshot, errors = scratch / "before-attempt", scratch / "attempt.err"
    for job in JOBS:
        while result.kills[job] < plan[job] and result.attempts[job] - result.kills[job] < MAX_MISSES:
            shutil.rmtree(snapshot, ignore_errors=True)
            shutil.copytree(wrecked, snapshot)
            moment = chooser.uniform(0.0, durations[job])
            code, ran = _attempt(wrecked, job, moment, errors)
            result.attempts[job] += 1
            if code == -signal.SIGKILL:
                result.kills[job] += 1
                say(f"chaos: lklab {job} killed {moment:.1f}s after its first write")
                continue
            if code != 0:
                raise RuntimeError(f"lklab {job} exited {code} on the chaos lake:\n{errors.read_text()[-3000:]}")
            # it ran to the end first: undo its work, so that the next kill interrupts the job, not
            # a rerun, and draw the next moment within the time it took from here
            _restore(snapshot, wrecked)
            durations[job] = ran
            say(
                f"chaos: lklab {job} had finished {ran:.1f}s after its first write, before its kill at {moment:.1f}s; "
                "its work undone, drawn again"
            )
        _finish(wrecked, job, here=spark is not None)
        say(f"chaos: lklab {job} run to completion" + (" in this process" if spark is not None else ""))
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
    parser.add_argument(
        "--kills", type=int, default=20, help="SIGKILLs of a running job across the four jobs (default 20)"
    )
    parser.add_argument("--seed", type=int, default=1, help="random seed: which jobs, at which moments (default 1)")
    parser.add_argument("--events", type=int, default=3000, help="events in the generated log (default 3,000)")
    parser.add_argument(
        "--segment-minutes", type=int, default=10, help="event time per log segment (default 10: 12 segments)"
    )
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="lklab-chaos-") as scratch:
        result = chaos(args.kills, args.seed, args.events, Path(scratch), segment_minutes=args.segment_minutes)
    for line in result.summary():
        print(line)
    short = sum(result.kills.values()) < args.kills
    if short:
        print(f"only {sum(result.kills.values())} of {args.kills} kills interrupted a running job")
    return 1 if result.differences or short else 0


if __name__ == "__main__":
    sys.exit(main())

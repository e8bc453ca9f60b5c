"""A benchmark's process timed from outside: wall seconds, CPU seconds of it and of every process
it started (read every 0.2 s, the latest reading of each kept, so one that ends between two
readings keeps its last one), its exit code and the 1-minute load average before and after."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass

import psutil

__all__ = ["ProcessRun", "timed_run"]


@dataclass(frozen=True)
class ProcessRun:
    seconds: float
    cpu_seconds: float
    exit: int
    load_before: float
    load_after: float


def _tree_cpu(root: psutil.Process, seen: dict[int, float]) -> None:
    for proc in [root, *root.children(recursive=True)]:
        try:
            times = proc.cpu_times()
            seen[proc.pid] = times.user + times.system
        except psutil.Error:
            continue


def timed_run(argv: list[str], env: dict[str, str], cwd: str, ok: Sequence[int] = (0,)) -> ProcessRun:
    """Run ``argv`` to its end and time it; ``SystemExit`` with its stderr's tail when its exit
    code is not among ``ok``."""
    before = os.getloadavg()[0]
    started = time.perf_counter()
    process = subprocess.Popen(argv, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    root, seen = psutil.Process(process.pid), {}
    while process.poll() is None:
        _tree_cpu(root, seen)
        time.sleep(0.2)
    seconds = time.perf_counter() - started
    if process.returncode not in ok:
        raise SystemExit(f"{' '.join(argv[:5])} failed ({process.returncode}):\n{process.stderr.read()[-3000:]}")
    return ProcessRun(seconds, sum(seen.values()), process.returncode, before, os.getloadavg()[0])

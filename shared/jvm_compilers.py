"""The driver JVM's compilers for a command that runs one job and exits.

A JVM compiles the code it runs often twice: C1 soon (quick to compile, good code), then C2 for
the hottest (several times the compile work, faster code). A session that runs the same plans
again and again (``lklab demo``, ``lklab compare``, an always-on speed layer) earns C2's work
back, and so does a job long enough to run its hottest code for minutes. A command that runs one
job of seconds to a minute runs most of its code, Spark's generated code for each plan above
all, too briefly: C2's compiles cost more CPU than its code saves, and on two cores they take it
from the job. Such a command's JVM stops at C1 (``ONE_JOB``).

Measured as processes on two cores (``benchmarks/jit_bench.py``, docs/benchmarks.md): with C1
alone ``lklab reconcile`` took 0.80x the wall time (0.59x the CPU) on a 200,000-event log and
0.78x (0.58x) on a 1,000,000-event one; ``lklab batch`` and ``lklab replay`` 0.85x and 0.91x
on the 200,000-event log (39 MiB), but 1.14x and 1.04x on the 1,000,000-event one (195 MiB):
their work grows with the log, and they stop at C1 only below ``SMALL_LOG_BYTES`` of it.

``SPARK_SUBMIT_OPTS`` naming a tier (``-XX:TieredStopAtLevel=4``: both compilers, the JVM's
default) is the user's choice and is kept.
"""

from __future__ import annotations

import os
from pathlib import Path

from shared.eventlog import EventLog

__all__ = ["ONE_JOB", "SMALL_LOG_BYTES", "log_bytes", "one_job_options"]

ONE_JOB = "-XX:TieredStopAtLevel=1"
# Between the two logs measured (module docstring), nearer the smaller: where C1 alone still won.
SMALL_LOG_BYTES = 64 * 2**20


def log_bytes(lake: str | Path) -> int:
    """The bytes of the lake's log: its segments' files, as listed now (a damaged log's too: the
    job itself says what is wrong with it)."""
    root = EventLog(lake).root
    if not root.is_dir():
        return 0
    with os.scandir(root) as entries:
        return sum(entry.stat().st_size for entry in entries if entry.name.startswith("segment-"))


def one_job_options(given: str, grows_with: int | None = None) -> str | None:
    """What a one-job command's driver adds to ``given`` (its ``SPARK_SUBMIT_OPTS``): ``ONE_JOB``;
    None when ``given`` names a tier, or when the job's work grows with a log of ``grows_with``
    bytes, ``SMALL_LOG_BYTES`` or more."""
    if "-XX:TieredStopAtLevel=" in given:
        return None
    if grows_with is not None and grows_with >= SMALL_LOG_BYTES:
        return None
    return ONE_JOB

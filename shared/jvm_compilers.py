"""The driver JVM's compilers for a command that runs one job and exits.

A JVM compiles the code it runs often twice: C1 soon (quick to compile, good code), then C2 for
the hottest (several times the compile work, faster code). A session that runs the same plans
again and again (``lklab demo``, ``lklab compare``, an always-on speed layer) earns C2's work
back, and so does a job long enough to run its hottest code for minutes. A command that runs one
job of seconds to a minute runs most of its code, Spark's generated code for each plan above
all, too briefly: C2's compiles cost more CPU than its code saves, and on two cores they take it
from the job. Such a command's JVM stops at C1 (``ONE_JOB``): a reconcile whatever the lake; a
batch or a replay, whose work grows with the log, only below ``SMALL_LOG_BYTES`` of log. The
measurements behind both choices are on the benchmarks page (docs/benchmarks.md, "The JVM's
compilers"; ``benchmarks/jit_bench.py``).

A JIT setting of the user's (a tier, ``-XX:-TieredCompilation`` or ``-XX:CompilationMode``, in
``SPARK_SUBMIT_OPTS`` or ``JAVA_TOOL_OPTIONS``) is kept: nothing is added then.
"""

from __future__ import annotations

import os
from pathlib import Path

from shared.eventlog import EventLog

__all__ = ["ONE_JOB", "SMALL_LOG_BYTES", "one_job_options", "sets_jit"]

ONE_JOB = "-XX:TieredStopAtLevel=1"
# Between the two logs measured (the benchmarks page), nearer the smaller, where C1 alone won.
SMALL_LOG_BYTES = 64 * 2**20
_USERS_JIT = ("TieredStopAtLevel=", "TieredCompilation", "CompilationMode=")


def sets_jit(given: str) -> bool:
    """Whether ``given`` (JVM options) or ``JAVA_TOOL_OPTIONS`` sets the JIT compilers already."""
    return any(setting in f"{given} {os.environ.get('JAVA_TOOL_OPTIONS', '')}" for setting in _USERS_JIT)


def one_job_options(given: str, lake: str | Path | None = None) -> str | None:
    """What a one-job command's driver adds to ``given``, its ``SPARK_SUBMIT_OPTS``.

    ``ONE_JOB``; None when ``given`` or ``JAVA_TOOL_OPTIONS`` sets the JIT already, or when the
    job's work grows with ``lake``'s log and that log holds ``SMALL_LOG_BYTES`` or more (or
    cannot be measured).
    """
    if sets_jit(given):
        return None
    if lake is not None:
        try:
            if EventLog(lake).size_bytes() >= SMALL_LOG_BYTES:
                return None
        except OSError:
            return None
    return ONE_JOB

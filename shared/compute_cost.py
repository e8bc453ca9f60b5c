"""Wall time and CPU seconds of a piece of work, for comparing what each path costs.

CPU seconds are user + system time of this process and every process below it (the Spark JVM
started by PySpark, its Python workers), read from the operating system before and after. A
process that starts and ends inside the measured span is counted through its parent's
children times. With a cluster master the executors run elsewhere and are not counted: the
figure then covers the driver only, and says so (``scope``).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import psutil

__all__ = ["ComputeCost", "measure_cost"]


@dataclass
class ComputeCost:
    """Filled in when the measured block ends; seconds."""

    wall_seconds: float = 0.0
    cpu_seconds: float = 0.0
    scope: str = "driver and local executors"
    _start: dict = field(default_factory=dict, repr=False)


def _cpu_by_process() -> dict[tuple[int, float], float]:
    """CPU seconds per live process of this tree, keyed by (pid, create time) against pid reuse."""
    me = psutil.Process()
    out: dict[tuple[int, float], float] = {}
    for proc in [me, *me.children(recursive=True)]:
        try:
            times = proc.cpu_times()
            out[(proc.pid, proc.create_time())] = (
                times.user + times.system + times.children_user + times.children_system
            )
        except psutil.Error:  # ended between listing and reading: its time reaches its parent
            continue
    return out


@contextmanager
def measure_cost(master: str = "local") -> Iterator[ComputeCost]:
    """Measure the block: ``with measure_cost(config.spark_master) as cost: ...``."""
    cost = ComputeCost(scope="driver and local executors" if master.startswith("local") else "driver only")
    before = _cpu_by_process()
    started = time.monotonic()
    try:
        yield cost
    finally:
        after = _cpu_by_process()
        cost.wall_seconds = round(time.monotonic() - started, 3)
        cost.cpu_seconds = round(sum(t - before.get(key, 0.0) for key, t in after.items()), 3)

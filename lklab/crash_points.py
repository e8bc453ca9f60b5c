"""Named crash points: where the exactly-once tests kill a stream mid-batch.

``LKLAB_CRASH_AT=<batch>:<point>`` makes the process kill itself with SIGKILL when micro-batch
``<batch>`` reaches ``<point>``:

* ``start``: the batch has begun, nothing of it is read or written;
* ``before:<table>`` / ``after:<table>``: around the commit of each table the batch writes
  (``<table>`` is the catalog name, without the run's prefix), the stream's state last.

SIGKILL leaves no ``finally`` and no shutdown hook: what a lost machine leaves. A restart must
then end with the tables of a run that was never killed. Without the variable (always, outside
those tests) a crash point is one environment lookup.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

__all__ = ["CRASH_AT", "crash_point", "committing", "batch_points"]

CRASH_AT = "LKLAB_CRASH_AT"


def crash_point(batch_id: int, point: str) -> None:
    """Kill this process with SIGKILL if ``LKLAB_CRASH_AT`` names ``<batch_id>:<point>``."""
    if os.environ.get(CRASH_AT) == f"{batch_id}:{point}":
        os.kill(os.getpid(), signal.SIGKILL)


@contextmanager
def committing(batch_id: int, table: str) -> Iterator[None]:
    """The crash points ``before:<table>`` and ``after:<table>`` around a commit (the second
    only once the commit returned)."""
    crash_point(batch_id, f"before:{table}")
    yield
    crash_point(batch_id, f"after:{table}")


def batch_points(batch_id: int, tables: Iterable[str]) -> list[str]:
    """Every named crash point of micro-batch ``batch_id``, in the order the batch reaches them,
    for a stream that commits ``tables`` (catalog names) in that order."""
    return [f"{batch_id}:start"] + [f"{batch_id}:{when}:{table}" for table in tables for when in ("before", "after")]

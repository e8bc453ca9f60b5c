"""A live run's micro-batches from start to commit: the latency a configuration itself adds.

A comparison's live runs read a log written before any of them started, so the wait from a
line's publication to its commit (``shared.live_latency``) says how long the log waited for the
run, which is the order of the runs, not the configuration. What is the configuration's own is
each micro-batch's time from its start to its outputs' commit (``committed_at - started_at`` on
its metrics row): what a line waits behind no backlog, beyond its trigger's wait. Every line of
a batch waits its batch's time, so the quantiles are over lines (the lab's one percentile,
``reconciliation.result.weighted_waits``); batches that read no line do not count.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from reconciliation.result import weighted_waits
from shared.live_latency import start_to_commit

__all__ = ["CommitTime", "commit_time"]


@dataclass(frozen=True)
class CommitTime:
    """Seconds from a micro-batch's start to its commit, nearest-rank over the ``lines`` read by
    the ``batches`` measured."""

    batches: int
    lines: int
    p50: float
    p95: float
    max: float

    def __post_init__(self) -> None:
        if self.batches <= 0 or self.lines < self.batches:
            raise ValueError(f"a commit time needs batches and lines, got {self.batches} and {self.lines}")
        if not 0 <= self.p50 <= self.p95 <= self.max:
            raise ValueError(f"commit time quantiles out of order: {self.p50}, {self.p95}, {self.max}")


def commit_time(batches: Iterable[tuple[int | None, datetime | None, datetime | None]]) -> CommitTime | None:
    """``CommitTime`` of micro-batches ``(input lines, started_at, committed_at)``; None when no
    batch read a line and recorded both times (a replay's rows, a lake from before them)."""
    measured = [
        (start_to_commit(started, committed), lines)
        for lines, started, committed in batches
        if lines and started is not None and committed is not None
    ]
    summary = weighted_waits(measured)
    return None if summary is None else CommitTime(len(measured), *summary)

"""The batch recompute's run history, ``batch_runs``: where each recompute read up to.

One row per execution (the days written, the log position, where every line went, wall and CPU
seconds). ``recorded_position`` is what makes a rerun for the same days read the same segments;
the reconciliation reads it too, to know how far the truth it compares has read.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

import pyarrow as pa

from shared.catalog import BATCH_RUNS
from shared.locks import history_append
from shared.partitions import DayRange
from shared.tables import Tables

__all__ = ["BatchRun", "PositionError", "recorded_position", "record_run", "RUNS_SCHEMA"]


# One row per recompute: ``date_from``/``date_to`` the days it wrote (null: it found none).
RUNS_SCHEMA = pa.schema(
    {
        "run_number": pa.int64(),
        "recorded_at": pa.timestamp("us", tz="UTC"),
        "date_from": pa.date32(),
        "date_to": pa.date32(),
        **dict.fromkeys(
            ("last_segment", "lines", "events", "duplicates", "dead_letters", "heartbeats", "windows"), pa.int64()
        ),
        "wall_seconds": pa.float64(),
        "cpu_seconds": pa.float64(),
    }
)


class PositionError(ValueError):
    """The days asked for were computed from different log positions."""


@dataclass(frozen=True)
class BatchRun:
    """Where a batch recompute read up to, where every line it read went, and what it cost.

    It read segments ``first_segment..last_segment``: from 1, or after those its
    ``batch_events`` already held (``lklab.pipelines.billing_windows.batch``); the counts are of
    the lines it read. ``batch_runs`` records ``last_segment`` and the counts."""

    last_segment: int
    lines: int
    events: int
    duplicates: int
    dead_letters: int
    heartbeats: int = 0
    days: DayRange = DayRange()
    windows: int = 0
    wall_seconds: float = 0.0
    cpu_seconds: float = 0.0
    first_segment: int = 1

    @property
    def conserved(self) -> bool:
        """Every line is an event, a duplicate, a dead letter or a heartbeat, exactly once."""
        return self.lines == self.events + self.duplicates + self.dead_letters + self.heartbeats


def recorded_position(tables: Tables, days: DayRange) -> int | None:
    """The segment the latest runs covering ``days`` read up to (None: never computed).

    Raises ``PositionError`` when the days were computed from different positions, or some
    were never computed: recomputing them together would silently change some of them.
    """
    if days.everything or not tables.exists(BATCH_RUNS.name):
        return None
    runs = sorted(tables.read_arrow(BATCH_RUNS.name).to_pylist(), key=lambda r: r["run_number"])
    positions: dict[dt.date, int | None] = {}
    day = days.first
    while day <= days.last:
        covering = [r for r in runs if r["date_from"] is not None and r["date_from"] <= day <= r["date_to"]]
        positions[day] = covering[-1]["last_segment"] if covering else None
        day += dt.timedelta(days=1)
    distinct = set(positions.values())
    if len(distinct) > 1:
        detail = ", ".join(f"{d}: {'never' if p is None else f'segment {p}'}" for d, p in positions.items())
        raise PositionError(
            f"days {days.describe()} were computed from different log positions ({detail}); "
            "recompute them together from the log's current end with --refresh"
        )
    return distinct.pop()


def record_run(tables: Tables, run: BatchRun, written_days: tuple[dt.date | None, dt.date | None]) -> None:
    """Append ``run`` to ``batch_runs`` with the next run number (one writer at a time)."""
    with history_append(tables.root.parent, BATCH_RUNS.name):
        _append_run(tables, run, written_days)


def _append_run(tables: Tables, run: BatchRun, written_days: tuple[dt.date | None, dt.date | None]) -> None:
    runs = tables.read_arrow(BATCH_RUNS.name) if tables.exists(BATCH_RUNS.name) else None
    number = 1 if runs is None else max(runs["run_number"].to_pylist()) + 1
    row = {
        "run_number": number,
        "recorded_at": dt.datetime.now(dt.UTC),
        "date_from": written_days[0],
        "date_to": written_days[1],
        "last_segment": run.last_segment,
        "lines": run.lines,
        "events": run.events,
        "duplicates": run.duplicates,
        "dead_letters": run.dead_letters,
        "heartbeats": run.heartbeats,
        "windows": run.windows,
        "wall_seconds": run.wall_seconds,
        "cpu_seconds": run.cpu_seconds,
    }
    tables.append(BATCH_RUNS.name, pa.Table.from_pylist([row], RUNS_SCHEMA), app_id="batch-runs", version=number)

"""The log's clock at every segment boundary, found without a pass in log order.

The live stream carries its ``ClockState`` from one micro-batch to the next. A replay reads the
whole log at once, segments in parallel, so each task needs the state at the start of its
segments. It follows from two small passes over the log:

1. per segment, in one pass: its largest ingest time (the processing time at the start of a
   segment is the largest ingest time of every segment before it) and its runs of lines in one
   tick, ticked from an unknown start (``clock.tick_runs``: with a known start, runs can only
   merge);
2. on the driver, segment after segment: from the processing time at its start, the runs
   become at most two pseudo-lines (``clock.tick_summary``) that carry the segment's ticks
   exactly, and ``clock.advance`` over them gives the state at the next boundary.

The result (``LogClock``) is a sequence as long as the log has segments, shipped to every task.
A task clocks its lines with ``LogClock.lines_from``: one ``advance`` per run of consecutive
segments it holds, from the state at the run's first one.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame
from pyspark.sql.pandas.types import from_arrow_schema

from shared.clock import NO_TIME, ClockSettings, ClockState, advance, line_keys, tick_runs, tick_summary

__all__ = ["LogClock", "log_clock", "by_line", "event_times", "micros_or_unknown", "CLOCK_INPUT"]

CLOCK_INPUT = ("segment", "line_number", "ingest_time", "event_time", "reject_reason", "heartbeat")


def by_line(table: pa.Table) -> pa.Table:
    """``table`` in log order."""
    return table.take(pc.sort_indices(table, sort_keys=[("segment", "ascending"), ("line_number", "ascending")]))


def micros_or_unknown(column) -> np.ndarray:
    """Timestamps as int64 microseconds, ``NO_TIME`` for null."""
    return column.cast(pa.int64()).fill_null(NO_TIME).to_numpy(zero_copy_only=False)


def event_times(lines: pa.Table) -> np.ndarray:
    """Each line's event time if it is an event (not a dead letter, not a heartbeat), else ``NO_TIME``."""
    is_event = pc.and_(pc.is_null(lines["reject_reason"]), pc.invert(lines["heartbeat"])).to_numpy(zero_copy_only=False)
    return np.where(is_event, micros_or_unknown(lines["event_time"]), NO_TIME)


_SUMMARY = pa.schema(
    [
        pa.field(name, pa.int64())
        for name in ("segment", "key", "p", "e", "lines", "dead_letters", "heartbeats", "max_ingest")
    ]
    + [pa.field("stats", pa.bool_())]
)


def _summarise(settings: ClockSettings, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Per segment: its figures (a ``stats`` row), and its ticks as pseudo-lines computed from
    an unknown start (the processing time at the segment's start is not known yet): one per run
    of lines in one tick (with ``I = 0``, the two of ``tick_summary``; ticks are lines there)."""
    received = list(batches)
    if not received:
        return
    rows = by_line(pa.Table.from_batches(received))
    segments = rows["segment"].to_numpy()
    bounds = np.flatnonzero(np.concatenate([[True], segments[1:] != segments[:-1], [True]]))
    unknown = ClockState()
    for first, stop in zip(bounds[:-1], bounds[1:]):
        segment, lines = int(segments[first]), rows.slice(first, stop - first)
        keys = line_keys(lines["segment"].to_numpy(), lines["line_number"].to_numpy())
        ingest, events = micros_or_unknown(lines["ingest_time"]), event_times(lines)
        if settings.watermark_interval > 0:
            pseudo = tick_runs(unknown, settings, keys, ingest, events)
        else:
            pseudo = tick_summary(unknown, settings, keys, ingest, events)
        count = len(pseudo[0])
        zeros = np.zeros(count, np.int64)
        yield pa.RecordBatch.from_arrays(
            [
                pa.array(np.full(count, segment, np.int64)),
                *map(pa.array, pseudo),
                zeros,
                zeros,
                zeros,
                zeros,
                pa.array(np.zeros(count, bool)),
            ],
            schema=_SUMMARY,
        )
        figures = [
            segment,
            0,
            0,
            0,
            lines.num_rows,
            int(pc.sum(pc.is_valid(lines["reject_reason"])).as_py() or 0),
            int(pc.sum(lines["heartbeat"]).as_py() or 0),
            int(ingest.max()),
        ]
        yield pa.RecordBatch.from_arrays(
            [pa.array([v], pa.int64()) for v in figures] + [pa.array([True])], schema=_SUMMARY
        )


def _summary(lines: DataFrame, settings: ClockSettings) -> pa.Table | None:
    """Every segment's figures and pseudo-lines; None when some segment's lines were in two partitions."""
    summary = (
        lines.select(*CLOCK_INPUT)
        .mapInArrow(functools.partial(_summarise, settings), from_arrow_schema(_SUMMARY))
        .toArrow()
    )
    stats = summary.filter(summary["stats"])["segment"].to_numpy()
    return (
        None
        if len(np.unique(stats)) < len(stats)
        else summary.sort_by([("segment", "ascending"), ("key", "ascending")])
    )


@dataclass(frozen=True)
class LogClock:
    """The clock at the start of every segment with lines (``starts``, by segment number) and
    after the last line (``end``); ``segments`` ascending, ``ends``: ``W*`` after each."""

    settings: ClockSettings
    segments: np.ndarray
    starts: dict[int, ClockState]
    end: ClockState

    @property
    def ends(self) -> np.ndarray:
        after = [self.starts[int(s)] for s in self.segments[1:]] + [self.end]
        return np.array(
            [NO_TIME if (w := state.watermark_after(self.settings)) is None else w for state in after], dtype=np.int64
        )

    @property
    def final(self) -> int | None:
        """``W*`` after the log's last line."""
        return self.end.watermark_after(self.settings)

    def runs(self, present: np.ndarray) -> list[tuple[int, int]]:
        """Index ranges of ``present`` (sorted segment numbers, those a task holds) whose
        segments follow each other in the log: no segment with lines lies between neighbours."""
        place = np.searchsorted(self.segments, present)
        breaks = np.flatnonzero(np.diff(place) != 1) + 1
        bounds = [0, *breaks.tolist(), len(present)]
        return list(zip(bounds[:-1], bounds[1:]))


def log_clock(lines: DataFrame, settings: ClockSettings) -> tuple[LogClock, DataFrame, pa.Table]:
    """The clock at every segment boundary; ``lines`` with every segment whole in one partition
    (as the log's reader gives them; repartitioned by segment when they are not); and per
    segment with lines: ``lines``, ``dead_letters``, ``heartbeats``, ``max_ingest``."""
    summary = _summary(lines, settings)
    if summary is None:
        lines = lines.repartition(max(1, lines.rdd.getNumPartitions()), "segment")
        summary = _summary(lines, settings)
    stats = summary.filter(summary["stats"]).select(["segment", "lines", "dead_letters", "heartbeats", "max_ingest"])
    runs = summary.filter(pc.invert(summary["stats"]))
    segments = stats["segment"].to_numpy()
    per_segment = runs["segment"].to_numpy()
    keys, p, e = (runs[c].to_numpy() for c in ("key", "p", "e"))
    bounds = np.searchsorted(per_segment, segments, side="left").tolist() + [len(per_segment)]
    state, starts = ClockState(), {}
    for index, segment in enumerate(segments.tolist()):
        starts[segment] = state
        part = slice(bounds[index], bounds[index + 1])
        # the runs were ticked from an unknown start: from the true one, ticks may merge
        pseudo = tick_summary(ClockState(processing_time=state.processing_time), settings, keys[part], p[part], e[part])
        state = advance(state, settings, *pseudo).state
    return LogClock(settings, segments, starts, state), lines, stats

"""The log's clock at every segment boundary, found without a pass in log order.

The live stream carries its ``ClockState`` from one micro-batch to the next. A replay reads the
whole log at once, segments in parallel, so each task needs the state at the start of its
segments. It follows from two small passes over the log:

1. per segment, the largest ingest time (``segment_stats``): the processing time at the start
   of a segment is the largest ingest time of every segment before it;
2. per segment, from that processing time, at most two pseudo-lines (``clock.tick_summary``)
   that carry the segment's ticks exactly.

Folding ``clock.advance`` over the pseudo-lines on the driver gives the state at every segment
boundary (``LogClock``): a sequence as long as the log has segments, shipped to every task.
A task clocks its lines with ``LogClock.lines_from``: one ``advance`` per run of consecutive
segments it holds, from the state at the run's first one.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema

from shared.clock import NO_TIME, ClockSettings, ClockState, advance, line_keys, tick_summary

__all__ = ["LogClock", "log_clock", "segment_stats", "by_line", "event_times", "micros_or_unknown", "CLOCK_INPUT"]

CLOCK_INPUT = ("segment", "line_number", "ingest_time", "event_time", "reject_reason", "heartbeat")
_SUMMARY = pa.schema(
    [pa.field("segment", pa.int64()), pa.field("key", pa.int64()), pa.field("p", pa.int64()), pa.field("e", pa.int64()), pa.field("last", pa.bool_())]
)


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


def segment_stats(parsed: DataFrame) -> pa.Table:
    """Per segment with lines: ``lines``, ``max_ingest`` (microseconds), ``dead_letters``, ``heartbeats``."""
    stats = parsed.groupBy("segment").agg(
        F.count(F.lit(1)).alias("lines"),
        F.max(F.unix_micros("ingest_time")).alias("max_ingest"),
        F.sum(F.col("reject_reason").isNotNull().cast("long")).alias("dead_letters"),
        F.sum(F.col("heartbeat").cast("long")).alias("heartbeats"),
    )
    return stats.toArrow().sort_by("segment")


def _summarise(starts: dict[int, int | None], settings: ClockSettings, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    received = list(batches)
    if not received:
        return
    rows = by_line(pa.Table.from_batches(received))
    segments = rows["segment"].to_numpy()
    bounds = np.flatnonzero(np.concatenate([[True], segments[1:] != segments[:-1], [True]]))
    for first, stop in zip(bounds[:-1], bounds[1:]):
        segment, lines = int(segments[first]), rows.slice(first, stop - first)
        keys = line_keys(lines["segment"].to_numpy(), lines["line_number"].to_numpy())
        state = ClockState(processing_time=starts[segment])
        pseudo = tick_summary(state, settings, keys, micros_or_unknown(lines["ingest_time"]), event_times(lines))
        count = len(pseudo[0])
        last = np.arange(count) == count - 1
        yield pa.RecordBatch.from_arrays([pa.array(np.full(count, segment, np.int64)), *map(pa.array, pseudo), pa.array(last)], schema=_SUMMARY)


def _summary(lines: DataFrame, segments: np.ndarray, starts_p: dict, settings: ClockSettings) -> pa.Table | None:
    """The pseudo-lines of every segment; None when some segment's lines were in two partitions."""
    summary = lines.select(*CLOCK_INPUT).mapInArrow(functools.partial(_summarise, starts_p, settings), from_arrow_schema(_SUMMARY)).toArrow()
    summary = summary.sort_by([("segment", "ascending"), ("key", "ascending")])
    lasts = summary["segment"].to_numpy()[summary["last"].to_numpy(zero_copy_only=False)]
    tasks_per_segment = np.bincount(np.searchsorted(segments, lasts), minlength=len(segments))
    return None if np.any(tasks_per_segment > 1) else summary


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
        return np.array([NO_TIME if (w := state.watermark_after(self.settings)) is None else w for state in after], dtype=np.int64)

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


def log_clock(lines: DataFrame, stats: pa.Table, settings: ClockSettings) -> tuple[LogClock, DataFrame]:
    """The clock at every segment boundary, and ``lines`` with every segment whole in one
    partition (as the log's reader gives them; repartitioned by segment when they are not)."""
    segments = stats["segment"].to_numpy()
    largest = np.maximum.accumulate(stats["max_ingest"].fill_null(NO_TIME).to_numpy(zero_copy_only=False))
    before = np.concatenate([[NO_TIME], largest[:-1]])
    starts_p = {int(s): (None if p == NO_TIME else int(p)) for s, p in zip(segments, before)}
    summary = _summary(lines, segments, starts_p, settings)
    if summary is None:
        lines = lines.repartition(max(1, lines.rdd.getNumPartitions()), "segment")
        summary = _summary(lines, segments, starts_p, settings)
    per_segment = summary["segment"].to_numpy()
    keys, p, e = (summary[c].to_numpy() for c in ("key", "p", "e"))
    bounds = np.searchsorted(per_segment, segments, side="left").tolist() + [len(per_segment)]
    state, starts = ClockState(), {}
    for index, segment in enumerate(segments.tolist()):
        starts[segment] = state
        part = slice(bounds[index], bounds[index + 1])
        state = advance(state, settings, keys[part], p[part], e[part]).state
    return LogClock(settings, segments, starts, state), lines

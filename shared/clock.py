"""The log's clock: processing time, and the watermark that advances on it.

**Processing time.** Every line of the log has a processing time ``p``: its ``ingest_time``
(stamped when the line was appended), made monotone in log order ``(segment, line_number)``. A
line never goes back before the line before it: one whose ``ingest_time`` is earlier, or which
has none (a line that did not parse), takes the processing time of the line before it.

**The watermark** advances on that clock at a fixed cadence, ``watermark_interval`` ``I``:

* with ``I > 0``, ticks are aligned to the epoch, ``T(p) = floor(p / I) * I``, and the watermark
  in force for a line is ``W = max(event_time of every event whose p is before T(p)) -
  watermark_delay``. It moves at most once per tick: the events of the current tick count from
  the next tick on;
* with ``I = 0`` it moves after every line: ``W = max(event_time of every earlier event) -
  watermark_delay``.

Before any event it is unknown (``NO_TIME``) and nothing is late. It never decreases: it derives
from a running maximum over a growing prefix of the log.

A line is *judged* by ``W``: lateness, late updates, session merging and the dedup horizon. After
the line, a window is *final* when ``W* >= window_end``, where ``W*`` is the watermark the next
line would see if it came in the same tick: ``W`` itself when ``I > 0``, and the maximum
including the line when ``I = 0``. ``W*`` of a line is never above ``W`` of any later line, so
a window once final never takes an on-time event again.

Heartbeat lines (``shared.events``) carry a processing time and no event: they move the clock
on, so the events of the ticks before them enter the watermark even while no traffic arrives.

Everything here is a function of the lines and their order alone. The stream keeps a small
``ClockState`` between micro-batches (committed with the rest of its state), and ``advance``
over two halves of a log, carrying the state, gives exactly what it gives over the whole: the
stream decides the same whatever micro-batches the log is cut into, across restarts, and in a
replay that computes the state at segment boundaries from per-tick maxima (``advance`` over one
pseudo-line per segment and tick gives the same state as over every line).

Times are integer microseconds since the epoch (``NO_TIME`` for unknown).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

__all__ = [
    "NO_TIME",
    "ClockSettings",
    "ClockState",
    "ClockRun",
    "Advances",
    "ADVANCE_COLUMNS",
    "advance",
    "tick_runs",
    "tick_summary",
    "line_keys",
    "split_line_keys",
    "known",
    "latest",
]

NO_TIME = np.iinfo(np.int64).min  # an unknown time (before any event, or a line without one)
_LINE_BITS = 32


def line_keys(segments: np.ndarray, line_numbers: np.ndarray) -> np.ndarray:
    """One int64 per line that sorts as the log does: ``segment << 32 | line_number``."""
    return (np.asarray(segments, dtype=np.int64) << _LINE_BITS) | np.asarray(line_numbers, dtype=np.int64)


def split_line_keys(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(segments, line_numbers)`` of ``line_keys``."""
    keys = np.asarray(keys, dtype=np.int64)
    return keys >> _LINE_BITS, keys & ((1 << _LINE_BITS) - 1)


def known(values: np.ndarray) -> np.ndarray:
    """Where a time array holds a time (not ``NO_TIME``)."""
    return values != NO_TIME


def latest(*values: int | None) -> int | None:
    """The latest of some optional times (None when none is known)."""
    seen = [v for v in values if v is not None and v != NO_TIME]
    return max(seen) if seen else None


def _time(value: int | None) -> int:
    return NO_TIME if value is None else int(value)


def _optional(value) -> int | None:
    value = int(value)
    return None if value == NO_TIME else value


@dataclass(frozen=True)
class ClockSettings:
    """``watermark_delay`` and ``watermark_interval`` (``I``; 0: after every line), microseconds."""

    watermark_delay: int
    watermark_interval: int

    def __post_init__(self) -> None:
        if self.watermark_delay < 0 or self.watermark_interval < 0:
            raise ValueError("watermark-delay and watermark-interval must not be negative")


@dataclass(frozen=True)
class ClockState:
    """Where the clock stands after a prefix of the log.

    ``processing_time``: of the last line; ``tick``: the tick it is in (``I = 0``: its line key);
    ``max_before_tick``: the largest event time of the ticks before; ``max_in_tick``: of the
    current tick so far. None: not known yet.
    """

    processing_time: int | None = None
    tick: int | None = None
    max_before_tick: int | None = None
    max_in_tick: int | None = None

    @property
    def max_event_time(self) -> int | None:
        return latest(self.max_before_tick, self.max_in_tick)

    def watermark(self, settings: ClockSettings) -> int | None:
        """The watermark in force for a further line of the current tick."""
        return None if self.max_before_tick is None else self.max_before_tick - settings.watermark_delay

    def watermark_after(self, settings: ClockSettings) -> int | None:
        """``W*`` after the last line: what windows are judged final by."""
        if settings.watermark_interval > 0:
            return self.watermark(settings)
        largest = self.max_event_time
        return None if largest is None else largest - settings.watermark_delay


@dataclass(frozen=True)
class ClockRun:
    """``advance`` over a run of lines: per line ``processing_time``, ``watermark`` (``W``, what
    the line is judged by) and ``watermark_after`` (``W*``), all int64 with ``NO_TIME`` for
    unknown; ``advances`` marks the lines after which ``W*`` is higher than before; ``state``
    is the clock after the last line."""

    processing_time: np.ndarray
    watermark: np.ndarray
    watermark_after: np.ndarray
    advances: np.ndarray
    state: ClockState


def _minus(values: np.ndarray, delay: int) -> np.ndarray:
    return np.where(known(values), values - delay, NO_TIME)


def _runs(state: ClockState, settings: ClockSettings, keys: np.ndarray, ingest: np.ndarray):
    """Per line: processing time, tick, and the index of its run of equal ticks (0: the tick the
    state was in)."""
    processing = np.maximum.accumulate(np.concatenate([[_time(state.processing_time)], ingest]))[1:]
    if settings.watermark_interval > 0:
        interval = settings.watermark_interval
        ticks = np.where(known(processing), processing - np.mod(processing, interval), NO_TIME)
    else:
        ticks = keys
    previous = np.concatenate([[_time(state.tick)], ticks[:-1]])
    return processing, ticks, np.cumsum(ticks != previous)


def tick_runs(state: ClockState, settings: ClockSettings, keys: np.ndarray, ingest: np.ndarray, event_time: np.ndarray):
    """One pseudo-line per run of lines in one tick: ``(keys, processing_times, event_times)``,
    the largest of each in the run. ``advance`` and ``tick_summary`` over them from any later
    processing time give what they give over the lines: a later start can only merge runs."""
    keys = np.asarray(keys, dtype=np.int64)
    if not len(keys):
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, empty
    processing, _, run = _runs(state, settings, keys, np.asarray(ingest, dtype=np.int64))
    first = run - run[0]
    size = int(first[-1]) + 1
    out = [np.full(size, NO_TIME, dtype=np.int64) for _ in range(3)]
    for target, values in zip(out, (keys, processing, np.asarray(event_time, dtype=np.int64))):
        np.maximum.at(target, first, values)
    return tuple(out)


def tick_summary(
    state: ClockState, settings: ClockSettings, keys: np.ndarray, ingest: np.ndarray, event_time: np.ndarray
):
    """At most two pseudo-lines standing for a run of lines: ``(keys, processing_times,
    event_times)``, the largest of each over the lines before the last tick, then over the last
    tick.

    ``advance`` over them, from any state with this ``processing_time``, ends in exactly the
    state it ends in over the lines (the clock remembers only the last tick apart from the rest):
    how the replay finds the clock at every segment boundary without a pass in log order. Only
    ``state.processing_time`` matters here: ticks follow from processing time alone."""
    keys = np.asarray(keys, dtype=np.int64)
    if not len(keys):
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, empty
    processing, _, run = _runs(state, settings, keys, np.asarray(ingest, dtype=np.int64))
    last = run == run[-1]
    event_time = np.asarray(event_time, dtype=np.int64)
    parts = [part for part in (~last, last) if part.any()]
    return tuple(
        np.array([values[part].max() for part in parts], dtype=np.int64) for values in (keys, processing, event_time)
    )


def advance(
    state: ClockState, settings: ClockSettings, keys: np.ndarray, ingest: np.ndarray, event_time: np.ndarray
) -> ClockRun:
    """Run the clock over lines in log order.

    ``keys``: ``line_keys``, ascending; ``ingest``: each line's ``ingest_time`` (``NO_TIME`` where
    absent or invalid); ``event_time``: each *event*'s time (``NO_TIME`` for heartbeats and lines
    that are not events).
    """
    keys = np.asarray(keys, dtype=np.int64)
    ingest = np.asarray(ingest, dtype=np.int64)
    event_time = np.asarray(event_time, dtype=np.int64)
    before_run = state.watermark_after(settings)
    if not len(keys):
        empty = np.zeros(0, dtype=np.int64)
        return ClockRun(empty, empty, empty, np.zeros(0, dtype=bool), state)
    processing, ticks, run = _runs(state, settings, keys, ingest)
    interval = settings.watermark_interval
    maxima = np.full(int(run[-1]) + 1, NO_TIME, dtype=np.int64)
    np.maximum.at(maxima, run, event_time)
    maxima[0] = max(maxima[0], _time(state.max_in_tick))
    before = np.maximum.accumulate(np.concatenate([[_time(state.max_before_tick)], maxima[:-1]]))
    watermark = _minus(before[run], settings.watermark_delay)
    if interval > 0:
        after = watermark
    else:
        after = _minus(np.maximum(before[run], maxima[run]), settings.watermark_delay)
    previous_after = np.concatenate([[_time(before_run)], after[:-1]])
    return ClockRun(
        processing_time=processing,
        watermark=watermark,
        watermark_after=after,
        advances=after > previous_after,
        state=ClockState(
            processing_time=_optional(processing[-1]),
            tick=_optional(ticks[-1]),
            max_before_tick=_optional(before[-1]),
            max_in_tick=_optional(maxima[-1]),
        ),
    )


# The columns of ``Advances.table``.
ADVANCE_COLUMNS = ("keys", "processing_time", "watermark_after", "batch_id")


@dataclass(frozen=True)
class Advances:
    """The lines after which ``W*`` rose, over a run of the log (ascending ``keys``), with their
    ``processing_time``, ``watermark_after`` and ``batch_id``; ``before``/``after``: ``W*``
    before the run's first line and after its last (None: unknown).

    A window ending at ``e`` became final at the first of these lines with ``watermark_after >=
    e``, provided it was not final before the run (``before < e``).
    """

    keys: np.ndarray
    processing_time: np.ndarray
    watermark_after: np.ndarray
    batch_id: np.ndarray
    before: int | None
    after: int | None

    @classmethod
    def of(cls, keys: np.ndarray, run: ClockRun, batch_id: np.ndarray, before: int | None) -> Advances:
        rows = run.advances
        return cls(
            keys=np.asarray(keys, dtype=np.int64)[rows],
            processing_time=run.processing_time[rows],
            watermark_after=run.watermark_after[rows],
            batch_id=np.asarray(batch_id, dtype=np.int64)[rows],
            before=before,
            after=_optional(run.watermark_after[-1]) if len(run.watermark_after) else before,
        )

    def table(self) -> pa.Table:
        """The advances as a table of ``ADVANCE_COLUMNS``, ``before``/``after`` in its metadata."""
        bounds = {"before": self.before, "after": self.after}
        columns = {name: pa.array(np.asarray(getattr(self, name), np.int64), pa.int64()) for name in ADVANCE_COLUMNS}
        return pa.table(columns).replace_schema_metadata(
            {name: "" if value is None else str(value) for name, value in bounds.items()}
        )

    @classmethod
    def from_table(cls, table: pa.Table, *, before: int | None = None, after: int | None = None) -> Advances:
        """``table`` (``ADVANCE_COLUMNS``, ascending ``keys``) as advances; ``before``/``after``
        from its metadata when it has them (``table``'s), else as given."""
        metadata = table.schema.metadata or {}

        def bound(name: bytes, given: int | None) -> int | None:
            if name not in metadata:
                return given
            return int(metadata[name]) if metadata[name] else None

        return cls(
            **{name: table[name].to_numpy() for name in ADVANCE_COLUMNS},
            before=bound(b"before", before),
            after=bound(b"after", after),
        )

    def finalising(self, window_end: np.ndarray) -> np.ndarray:
        """Per window end: the index of the advance that made it final in this run, -1 if none
        did (final before the run, or not final yet)."""
        window_end = np.asarray(window_end, dtype=np.int64)
        found = np.searchsorted(self.watermark_after, window_end, side="left")
        before = NO_TIME if self.before is None else self.before
        inside = (found < len(self.keys)) & (window_end > before)
        return np.where(inside, found, -1)

"""Event-time windows: which windows an event belongs to.

All windows are half-open intervals ``[start, end)`` in UTC on Spark's microsecond clock.

* Tumbling windows of ``size``: ``[N*size, (N+1)*size)`` for the integer N with
  ``N*size <= t < (N+1)*size``. Every event is in exactly one window.
* Sliding windows of ``size`` every ``slide``: ``[N*slide, N*slide + size)`` for every integer N
  with ``N*slide <= t < N*slide + size``. An event is in ``ceil(size / slide)`` windows when
  ``slide`` divides ``size``, otherwise in ``floor`` or ``ceil`` of that ratio.
* Session windows with ``gap``, per key ``(account_id, currency)``: events sorted by event time
  join one session while each is less than ``gap`` after the previous one; the session is
  ``[first event time, last event time + gap)``. This matches Spark's ``session_window``.

Windows are aligned to the Unix epoch, as Spark's ``window()`` aligns them with no offset.
The rule is written once, in Arrow (``assign_windows_table``): the speed layer applies it to a
micro-batch, ``assign_windows`` runs it over a Spark DataFrame.

What differs between the kinds lives on the kinds, so no other module asks which kind it has:

* ``merges``: whether a window's bounds can change as events arrive. Fixed windows (tumbling,
  sliding) never change; a session grows, and two sessions of a key merge when an event falls
  between them, so whoever folds or explains a session must look at every row of its key.
* ``late_windows(late)``: the windows a side-output row adds its event to when it is folded
  back in. A fixed window's late row names its window; a session's late event forms its own
  session ``[t, t + gap)``, one per line, to be merged with the ones it touches.
* ``merged(rows)``: window rows of a key relabelled with the bounds of the window they end up
  in (fixed windows: unchanged; sessions: overlapping intervals merged into one).

Fixed windows depend on an event's time alone, so they also have the rule as Spark columns
(``in_spark``): the batch path assigns them in the engine, with no Python process, and a test
holds it equal to ``assign_windows_table`` at every boundary.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Callable, Union

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql.types import StructField, TimestampType

from shared.durations import format_duration
from shared.spark_arrow import per_key, with_fields

__all__ = [
    "WINDOW_KINDS",
    "TumblingWindows",
    "SlidingWindows",
    "SessionWindows",
    "WindowSpec",
    "window_spec",
    "assign_windows_table",
    "assign_windows",
    "last_window_end",
    "micros",
    "KEY_COLUMNS",
    "WINDOW_COLUMNS",
    "RULE_COLUMNS",
]

WINDOW_KINDS = ("tumbling", "sliding", "session")
KEY_COLUMNS = ("account_id", "currency")
WINDOW_COLUMNS = ("window_start", "window_end")
RULE_COLUMNS = ("event_id", *KEY_COLUMNS, "event_time")  # all the rule reads, sessions included


@dataclass(frozen=True)
class TumblingWindows:
    """Fixed, non-overlapping windows of ``size`` microseconds."""

    size: int
    kind = "tumbling"

    def __post_init__(self) -> None:
        _require_positive("window-size", self.size)

    def describe(self) -> str:
        return f"tumbling {format_duration(self.size)}"

    merges = False

    def late_windows(self, late: DataFrame) -> DataFrame:
        """Side-output rows, one per (event, window): the windows are the ones they name."""
        return late

    def merged(self, rows: DataFrame) -> DataFrame:
        """Fixed windows never merge: ``rows`` as they are."""
        return rows

    def in_spark(self, events: DataFrame) -> DataFrame:
        """``assign_windows_table`` as Spark columns: ``events`` with ``window_start`` and
        ``window_end`` of the one window holding each ``event_time``."""
        start = _floor_column(F.unix_micros("event_time"), self.size)
        return events.withColumns({"window_start": F.timestamp_micros(start), "window_end": F.timestamp_micros(start + F.lit(self.size))})


@dataclass(frozen=True)
class SlidingWindows:
    """Overlapping windows of ``size`` microseconds starting every ``slide`` microseconds."""

    size: int
    slide: int
    kind = "sliding"

    def __post_init__(self) -> None:
        _require_positive("window-size", self.size)
        _require_positive("window-slide", self.slide)
        if self.slide > self.size:
            raise ValueError(
                f"window-slide ({format_duration(self.slide)}) must not exceed window-size "
                f"({format_duration(self.size)}): events between windows would belong to none"
            )

    @property
    def windows_per_event(self) -> int:
        """The most windows one event can belong to: ``ceil(size / slide)``."""
        return -(-self.size // self.slide)

    def describe(self) -> str:
        return f"sliding {format_duration(self.size)} every {format_duration(self.slide)}"

    merges = False

    def late_windows(self, late: DataFrame) -> DataFrame:
        """Side-output rows, one per (event, window): the windows are the ones they name."""
        return late

    def merged(self, rows: DataFrame) -> DataFrame:
        """Fixed windows never merge: ``rows`` as they are."""
        return rows

    def in_spark(self, events: DataFrame) -> DataFrame:
        """``assign_windows_table`` as Spark columns: one row per (event, window), the
        ``windows_per_event`` latest starts at or before ``event_time`` whose window still holds it."""
        time = F.unix_micros("event_time")
        back = F.explode(F.sequence(F.lit(0), F.lit(self.windows_per_event - 1))).alias("_back")
        start = _floor_column(time, self.slide) - F.col("_back") * F.lit(self.slide)
        return (
            events.select("*", back)
            .withColumn("window_start", start)
            .where(time < F.col("window_start") + F.lit(self.size))
            .withColumns({"window_start": F.timestamp_micros("window_start"), "window_end": F.timestamp_micros(F.col("window_start") + F.lit(self.size))})
            .drop("_back")
        )


@dataclass(frozen=True)
class SessionWindows:
    """Per-key sessions that close after ``gap`` microseconds without an event."""

    gap: int
    kind = "session"

    def __post_init__(self) -> None:
        _require_positive("session-gap", self.gap)

    def describe(self) -> str:
        return f"session gap {format_duration(self.gap)}"

    merges = True

    def late_windows(self, late: DataFrame) -> DataFrame:
        """One row per late line, its window the session its event forms alone: ``[t, t + gap)``."""
        return late.dropDuplicates(["segment", "line_number"]).withColumns(
            {"window_start": F.col("event_time"), "window_end": F.timestamp_micros(F.unix_micros("event_time") + F.lit(self.gap))}
        )

    def merged(self, rows: DataFrame) -> DataFrame:
        """Per key, rows whose ``[window_start, window_end)`` overlap (directly or through others)
        get the bounds of their union: the session they form together."""
        ordered = Window.partitionBy(*KEY_COLUMNS).orderBy("window_start", "window_end")
        reach = F.max(F.unix_micros("window_end")).over(ordered.rowsBetween(Window.unboundedPreceding, -1))
        starts = (reach.isNull() | (F.unix_micros("window_start") >= reach)).cast("long")
        session = Window.partitionBy(*KEY_COLUMNS, "_session")
        return (
            rows.withColumn("_session", F.sum(starts).over(ordered))
            .withColumns({"window_start": F.min("window_start").over(session), "window_end": F.max("window_end").over(session)})
            .drop("_session")
        )


WindowSpec = Union[TumblingWindows, SlidingWindows, SessionWindows]


def window_spec(kind: str, *, size: int, slide: int | None = None, gap: int) -> WindowSpec:
    """Build the window spec named ``kind``; ``slide`` defaults to ``size`` (tumbling)."""
    if kind == "tumbling":
        return TumblingWindows(size)
    if kind == "sliding":
        return SlidingWindows(size, slide if slide is not None else size)
    if kind == "session":
        return SessionWindows(gap)
    raise ValueError(f"window-kind: {kind!r} is not a window kind; valid: {', '.join(WINDOW_KINDS)}")


def _require_positive(name: str, value: int) -> None:
    if value <= 0:
        raise ValueError(f"{name} must be longer than zero, e.g. 1m (got {format_duration(value)})")


def assign_windows_table(spec: WindowSpec, events: pa.Table) -> pa.Table:
    """``events`` with ``window_start`` and ``window_end`` added (the rule itself, in Arrow).

    Needs ``event_time`` (a timestamp), and for sessions ``event_id`` and the key columns.
    Tumbling keeps one row per event; sliding emits one row per (event, window); sessions keep
    one row per event, all rows of a session carrying the same window, computed over the rows
    given: a stream must pass every event of the keys it recomputes.
    """
    if isinstance(spec, SessionWindows):
        return _sessions(events, spec)
    if isinstance(spec, TumblingWindows):
        starts = _floor_to(micros(events["event_time"]), spec.size)
        return _with_window(events, starts, spec.size)
    if isinstance(spec, SlidingWindows):
        return _sliding(events, spec)
    raise TypeError(f"not a window spec: {spec!r}")


def assign_windows(spec: WindowSpec) -> Callable[[DataFrame], DataFrame]:
    """``assign_windows_table`` over a Spark DataFrame: fixed windows in Spark (``in_spark``),
    sessions per key in Arrow (every event of a key must be in the same call)."""

    def transform(events: DataFrame) -> DataFrame:
        if not spec.merges:
            return spec.in_spark(events)
        schema = with_fields(events.schema, *[StructField(name, TimestampType()) for name in WINDOW_COLUMNS])
        return per_key(events, KEY_COLUMNS, functools.partial(assign_windows_table, spec), schema)

    return transform


def last_window_end(spec: TumblingWindows | SlidingWindows, times: np.ndarray) -> np.ndarray:
    """End of the last fixed window holding each event time (microseconds): once the
    watermark passes it, none of the event's windows can change."""
    step = spec.size if isinstance(spec, TumblingWindows) else spec.slide
    return _floor_to(times, step) + spec.size


def micros(times: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """Timestamps as integer microseconds since the epoch."""
    return np.asarray(times.cast(pa.int64()).to_numpy(zero_copy_only=False), dtype=np.int64)


def _floor_to(times: np.ndarray, step: int) -> np.ndarray:
    """Largest multiple of ``step`` not above ``times`` (also for times before 1970)."""
    return times - np.mod(times, step)


def _floor_column(times: Column, step: int) -> Column:
    """``_floor_to`` as a Spark column (``pmod``, like ``np.mod``, is never negative)."""
    return times - F.pmod(times, F.lit(step))


def _with_window(events: pa.Table, starts: np.ndarray, size: int) -> pa.Table:
    kind = events.schema.field("event_time").type
    return events.append_column("window_start", pa.array(starts).cast(kind)).append_column(
        "window_end", pa.array(starts + size).cast(kind)
    )


def _sliding(events: pa.Table, spec: SlidingWindows) -> pa.Table:
    times = micros(events["event_time"])
    per_event = spec.windows_per_event
    rows = np.repeat(np.arange(events.num_rows), per_event)
    starts = _floor_to(times, spec.slide)[rows] - np.tile(np.arange(per_event), events.num_rows) * spec.slide
    inside = times[rows] < starts + spec.size
    return _with_window(events.take(rows[inside]), starts[inside], spec.size)


def _sessions(events: pa.Table, spec: SessionWindows) -> pa.Table:
    order = [(name, "ascending") for name in (*KEY_COLUMNS, "event_time", "event_id")]
    ordered = events.take(pc.sort_indices(events, sort_keys=order))
    times = micros(ordered["event_time"])
    if not len(times):
        return _with_window(ordered, times, spec.gap)
    same_key = np.ones(len(times) - 1, dtype=bool)
    for name in KEY_COLUMNS:
        column = ordered[name]
        same_key &= pc.fill_null(pc.equal(column[1:], column[:-1]), False).to_numpy(zero_copy_only=False)
    opens = np.concatenate([[True], ~same_key | (np.diff(times) >= spec.gap)])
    firsts = np.flatnonzero(opens)
    session = np.cumsum(opens) - 1
    ends = np.maximum.reduceat(times, firsts) + spec.gap
    kind = ordered.schema.field("event_time").type
    return ordered.append_column("window_start", pa.array(times[firsts][session]).cast(kind)).append_column(
        "window_end", pa.array(ends[session]).cast(kind)
    )

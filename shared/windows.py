"""Event-time windows: which windows an event belongs to.

All windows are half-open intervals ``[start, end)`` in UTC on Spark's microsecond clock.

* Tumbling windows of ``size``: ``[N*size, (N+1)*size)`` for the integer N with
  ``N*size <= t < (N+1)*size``. Every event is in exactly one window.
* Sliding windows of ``size`` every ``slide``: ``[N*slide, N*slide + size)`` for every integer N
  with ``N*slide <= t < N*slide + size``. An event is in ``ceil(size / slide)`` windows when
  ``slide`` divides ``size``, otherwise in ``floor`` or ``ceil`` of that ratio.
* Session windows with ``gap``, per key ``(account_id, currency)``: events sorted by event time
  join one session while each is less than ``gap`` after the previous one; the session is
  ``[first event time, last event time + gap)``. This is Spark's ``session_window`` but at one
  point: an event exactly ``gap`` after the previous one opens a new session here, where Spark
  merges the two (their bounds touch); a Spark job asks for a gap 1 µs shorter and adds the 1 µs
  back to each end (``lklab.pipelines.declared.truth``).

Windows are aligned to the Unix epoch, as Spark's ``window()`` aligns them with no offset.
The rule is written once, in Arrow (``assign_windows_table``): the speed layer applies it to a
micro-batch, ``assign_windows`` runs it over a Spark DataFrame.

What differs between the kinds lives on the kinds, so no other module asks which kind it has:

* ``assign(events)``: the rule itself, in Arrow (``assign_windows_table`` calls it).
* ``pick(fixed=..., merging=...)``: of two alternatives, the one for this window's family.
  Fixed windows (tumbling, sliding) sit on the clock: an event's windows follow from its time
  alone, so each (event, window) pair can be judged, folded and explained on its own, by any
  subset of the events. A session grows, and two sessions of a key merge when an event falls
  between them: whoever judges, folds or explains a session must look at every event of its key.
  A module whose algorithm differs between the families hands both and lets the window choose.
* ``late_windows(late)``: the windows a side-output row adds its event to when it is folded
  back in. A fixed window's late row names its window; a session's late event forms its own
  session ``[t, t + gap)``, one per line, to be merged with the ones it touches.
* ``merged(rows, keys)``: window rows of a key relabelled with the bounds of the window they end up
  in (fixed windows: unchanged; sessions: overlapping intervals merged into one).
* ``require_fixed(why)``: the window itself, or a ``ValueError`` for sessions (a rule that only
  has meaning per fixed window says ``why``).
* ``overlaps``: whether an event can count in several windows (sliding), so a sum over the
  windows is not a total; ``settings``: the settings that define the windows, as a user names
  them (``window-size`` ...).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

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
    "FixedWindows",
    "SessionWindows",
    "WindowSpec",
    "window_spec",
    "window_reach",
    "assign_windows_table",
    "assign_windows",
    "micros",
    "KEY_COLUMNS",
    "WINDOW_COLUMNS",
    "RULE_COLUMNS",
]

WINDOW_KINDS = ("tumbling", "sliding", "session")
KEY_COLUMNS = ("account_id", "currency")
WINDOW_COLUMNS = ("window_start", "window_end")
RULE_COLUMNS = ("event_id", *KEY_COLUMNS, "event_time")  # all the rule reads, sessions included


T = TypeVar("T")


class _FixedWindows:
    """What tumbling and sliding windows share: windows fixed on the clock, ``size``
    microseconds long, one starting every ``step`` microseconds."""

    size: int
    overlaps = False

    @property
    def step(self) -> int:
        return self.size

    @property
    def windows_per_event(self) -> int:
        """The most windows one event can belong to: ``ceil(size / step)``."""
        return -(-self.size // self.step)

    def starts(self, event_time: int) -> list[int]:
        """The starts of the windows holding one ``event_time`` (microseconds), earliest first:
        ``assign`` for a single event, for a rule that walks events one at a time."""
        latest = event_time - event_time % self.step
        candidates = (latest - back * self.step for back in range(self.windows_per_event))
        return sorted(start for start in candidates if event_time < start + self.size)

    def pick(self, *, fixed: T, merging: T) -> T:
        """``fixed``: an event's windows follow from its time alone (see the module docstring)."""
        return fixed

    def require_fixed(self, why: str) -> FixedWindows:
        return self

    def assign(self, events: pa.Table) -> pa.Table:
        """One row per (event, window), in the order of ``events`` (an event's windows next to
        each other, earliest start last)."""
        times = micros(events["event_time"])
        per_event = self.windows_per_event
        rows = np.repeat(np.arange(events.num_rows), per_event)
        starts = _floor_to(times, self.step)[rows] - np.tile(np.arange(per_event), events.num_rows) * self.step
        inside = times[rows] < starts + self.size
        return _with_window(events.take(rows[inside]), starts[inside], self.size)

    def assign_frame(self, events: DataFrame) -> DataFrame:
        """``assign`` over a Spark DataFrame, done by Spark itself (``in_spark``, the same rule
        as columns, held equal to it by a test), with no Python process."""
        return self.in_spark(events)

    def late_windows(self, late: DataFrame) -> DataFrame:
        """Side-output rows, one per (event, window): the windows are the ones they name."""
        return late

    def merged(self, rows: DataFrame, keys: Sequence[str] = KEY_COLUMNS) -> DataFrame:
        """Fixed windows never merge: ``rows`` as they are."""
        return rows

    def in_spark(self, events: DataFrame) -> DataFrame:
        """``assign`` as Spark columns: one row per (event, window), the ``windows_per_event``
        latest starts at or before ``event_time`` whose window still holds it."""
        time = F.unix_micros("event_time")
        latest = _floor_column(time, self.step)
        if self.windows_per_event == 1:  # tumbling: the one window holding the time
            return events.withColumns(
                {
                    "window_start": F.timestamp_micros(latest),
                    "window_end": F.timestamp_micros(latest + F.lit(self.size)),
                }
            )
        back = F.explode(F.sequence(F.lit(0), F.lit(self.windows_per_event - 1))).alias("_back")
        return (
            events.select("*", back)
            .withColumn("window_start", latest - F.col("_back") * F.lit(self.step))
            .where(time < F.col("window_start") + F.lit(self.size))
            .withColumns(
                {
                    "window_start": F.timestamp_micros("window_start"),
                    "window_end": F.timestamp_micros(F.col("window_start") + F.lit(self.size)),
                }
            )
            .drop("_back")
        )


@dataclass(frozen=True)
class TumblingWindows(_FixedWindows):
    """Fixed, non-overlapping windows of ``size`` microseconds."""

    size: int
    kind = "tumbling"
    settings = ("window-size",)

    def __post_init__(self) -> None:
        _require_positive("window-size", self.size)

    def describe(self) -> str:
        return f"tumbling {format_duration(self.size)}"

    def assign(self, events: pa.Table) -> pa.Table:
        """One row per event: the window ``[N*size, (N+1)*size)`` holding its time."""
        return _with_window(events, _floor_to(micros(events["event_time"]), self.size), self.size)


@dataclass(frozen=True)
class SlidingWindows(_FixedWindows):
    """Overlapping windows of ``size`` microseconds starting every ``slide`` microseconds."""

    size: int
    slide: int
    kind = "sliding"
    settings = ("window-size", "window-slide")
    overlaps = True

    def __post_init__(self) -> None:
        _require_positive("window-size", self.size)
        _require_positive("window-slide", self.slide)
        if self.slide > self.size:
            raise ValueError(
                f"window-slide ({format_duration(self.slide)}) must not exceed window-size "
                f"({format_duration(self.size)}): events between windows would belong to none"
            )

    @property
    def step(self) -> int:
        return self.slide

    def describe(self) -> str:
        return f"sliding {format_duration(self.size)} every {format_duration(self.slide)}"


@dataclass(frozen=True)
class SessionWindows:
    """Per-key sessions that close after ``gap`` microseconds without an event."""

    gap: int
    kind = "session"
    settings = ("session-gap",)
    overlaps = False

    def __post_init__(self) -> None:
        _require_positive("session-gap", self.gap)

    def describe(self) -> str:
        return f"session gap {format_duration(self.gap)}"

    def pick(self, *, fixed: T, merging: T) -> T:
        """``merging``: an event's session depends on the other events of its key."""
        return merging

    def require_fixed(self, why: str) -> FixedWindows:
        raise ValueError(f"{why}: window-kind must be tumbling or sliding, not {self.kind}")

    def assign(self, events: pa.Table) -> pa.Table:
        """One row per event, all rows of a session carrying its bounds, over the rows given."""
        return _sessions(events, self)

    def assign_frame(self, events: DataFrame) -> DataFrame:
        """``assign`` over a Spark DataFrame in Arrow, every event of a key in one call."""
        schema = with_fields(events.schema, *[StructField(name, TimestampType()) for name in WINDOW_COLUMNS])
        return per_key(events, KEY_COLUMNS, self.assign, schema)

    def late_windows(self, late: DataFrame) -> DataFrame:
        """One row per late line, its window the session its event forms alone: ``[t, t + gap)``."""
        return late.dropDuplicates(["segment", "line_number"]).withColumns(
            {
                "window_start": F.col("event_time"),
                "window_end": F.timestamp_micros(F.unix_micros("event_time") + F.lit(self.gap)),
            }
        )

    def merged(self, rows: DataFrame, keys: Sequence[str] = KEY_COLUMNS) -> DataFrame:
        """Per key (the columns ``keys``), rows whose ``[window_start, window_end)`` overlap
        (directly or through others) get the bounds of their union: the session they form together."""
        ordered = Window.partitionBy(*keys).orderBy("window_start", "window_end")
        reach = F.max(F.unix_micros("window_end")).over(ordered.rowsBetween(Window.unboundedPreceding, -1))
        starts = (reach.isNull() | (F.unix_micros("window_start") >= reach)).cast("long")
        session = Window.partitionBy(*keys, "_session")
        return (
            rows.withColumn("_session", F.sum(starts).over(ordered))
            .withColumns(
                {"window_start": F.min("window_start").over(session), "window_end": F.max("window_end").over(session)}
            )
            .drop("_session")
        )


FixedWindows = TumblingWindows | SlidingWindows
WindowSpec = TumblingWindows | SlidingWindows | SessionWindows


def window_reach(spec: WindowSpec) -> int | None:
    """How far after its start a window holds events (microseconds): ``size`` for windows fixed
    on the clock; None for sessions, which grow with their events."""
    return spec.size if spec.pick(fixed=True, merging=False) else None


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
    return spec.assign(events)


def assign_windows(spec: WindowSpec) -> Callable[[DataFrame], DataFrame]:
    """``assign_windows_table`` over a Spark DataFrame: fixed windows in Spark (``in_spark``),
    sessions per key in Arrow (every event of a key must be in the same call)."""

    return spec.assign_frame


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

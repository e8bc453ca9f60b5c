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
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Union

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from shared.durations import format_duration

__all__ = [
    "WINDOW_KINDS",
    "TumblingWindows",
    "SlidingWindows",
    "SessionWindows",
    "WindowSpec",
    "window_spec",
    "assign_windows",
    "KEY_COLUMNS",
    "WINDOW_COLUMNS",
]

WINDOW_KINDS = ("tumbling", "sliding", "session")
KEY_COLUMNS = ("account_id", "currency")
WINDOW_COLUMNS = ("window_start", "window_end")


@dataclass(frozen=True)
class TumblingWindows:
    """Fixed, non-overlapping windows of ``size`` microseconds."""

    size: int
    kind = "tumbling"

    def __post_init__(self) -> None:
        _require_positive("window-size", self.size)

    def describe(self) -> str:
        return f"tumbling {format_duration(self.size)}"


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


@dataclass(frozen=True)
class SessionWindows:
    """Per-key sessions that close after ``gap`` microseconds without an event."""

    gap: int
    kind = "session"

    def __post_init__(self) -> None:
        _require_positive("session-gap", self.gap)

    def describe(self) -> str:
        return f"session gap {format_duration(self.gap)}"


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


def _require_positive(name: str, micros: int) -> None:
    if micros <= 0:
        raise ValueError(f"{name} must be longer than zero, e.g. 1m (got {format_duration(micros)})")


def _floor_to(micros: Column, step: int) -> Column:
    """Largest multiple of ``step`` not above ``micros`` (also for times before 1970)."""
    return micros - F.pmod(micros, F.lit(step))


def assign_windows(spec: WindowSpec) -> Callable[[DataFrame], DataFrame]:
    """Return a transformation adding ``window_start`` and ``window_end`` to each event.

    Input needs ``event_time`` (timestamp) and the key columns. Tumbling keeps one row per event;
    sliding emits one row per (event, window); sessions keep one row per event, all rows of a
    session carrying the same window. Sessions are computed over the rows given: a stream must
    pass every event of the keys it recomputes.
    """
    if isinstance(spec, TumblingWindows):
        return lambda events: _with_window(events, _floor_to(F.unix_micros("event_time"), spec.size), spec.size)
    if isinstance(spec, SlidingWindows):
        return lambda events: _sliding(events, spec)
    if isinstance(spec, SessionWindows):
        return lambda events: _sessions(events, spec)
    raise TypeError(f"not a window spec: {spec!r}")


def _with_window(events: DataFrame, start_micros: Column, size: int) -> DataFrame:
    return events.withColumn("window_start", F.timestamp_micros(start_micros)).withColumn(
        "window_end", F.timestamp_micros(start_micros + F.lit(size))
    )


def _sliding(events: DataFrame, spec: SlidingWindows) -> DataFrame:
    event_micros = F.unix_micros("event_time")
    last_start = _floor_to(event_micros, spec.slide)
    offsets = F.sequence(F.lit(0), F.lit(spec.windows_per_event - 1))
    exploded = events.withColumn("_window_index", F.explode(offsets))
    start = last_start - F.col("_window_index") * F.lit(spec.slide)
    return (
        _with_window(exploded, start, spec.size)
        .where(F.unix_micros("event_time") < F.unix_micros("window_end"))
        .drop("_window_index")
    )


def _sessions(events: DataFrame, spec: SessionWindows) -> DataFrame:
    by_key = Window.partitionBy(*KEY_COLUMNS).orderBy("event_time", "event_id")
    event_micros = F.unix_micros("event_time")
    previous = F.lag(event_micros).over(by_key)
    starts_session = (previous.isNull() | (event_micros - previous >= F.lit(spec.gap))).cast("long")
    numbered = events.withColumn("_session", F.sum(starts_session).over(by_key))
    session = Window.partitionBy(*KEY_COLUMNS, "_session")
    return (
        numbered.withColumn("window_start", F.min("event_time").over(session))
        .withColumn(
            "window_end",
            F.timestamp_micros(F.max(F.unix_micros("event_time")).over(session) + F.lit(spec.gap)),
        )
        .drop("_session")
    )

"""Days of windows: the unit a batch recompute or a reconciliation works on.

A window belongs to the UTC day its ``window_start`` falls on, so each window is in exactly
one day even when it ends after midnight. ``DayRange(first, last)`` includes both days.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column
from pyspark.sql import functions as F

__all__ = ["DayRange", "parse_day", "predicate_range"]

# The text of DayRange.predicate: rows whose column lies in [low, high), both UTC times.
_RANGE = "{column} >= '{low}' AND {column} < '{high}'"
_RANGE_TEXT = re.compile(r"^(\w+) >= '(\d{4}-\d\d-\d\dT00:00:00Z)' AND \1 < '(\d{4}-\d\d-\d\dT00:00:00Z)'$")


def parse_day(text: str, name: str = "date") -> dt.date:
    """``YYYY-MM-DD`` -> date, or ValueError naming the flag and the expected form."""
    try:
        return dt.date.fromisoformat(text)
    except (TypeError, ValueError):
        raise ValueError(f"{name}: {text!r} is not a date; expected YYYY-MM-DD, e.g. 2026-01-31") from None


@dataclass(frozen=True)
class DayRange:
    """UTC days ``first..last`` (inclusive); ``None`` for both means every window."""

    first: dt.date | None = None
    last: dt.date | None = None

    def __post_init__(self) -> None:
        if (self.first is None) != (self.last is None):
            raise ValueError("a day range needs both its first and its last day")
        if self.first is not None and self.last < self.first:
            raise ValueError(f"the range ends ({self.last}) before it starts ({self.first})")

    @classmethod
    def of(cls, day: str | None = None, first: str | None = None, last: str | None = None) -> DayRange:
        """From ``--date`` or ``--from``/``--to`` (mutually exclusive; neither = every window)."""
        if day is not None and (first is not None or last is not None):
            raise ValueError("give either --date or --from/--to, not both")
        if day is not None:
            parsed = parse_day(day)
            return cls(parsed, parsed)
        if (first is None) != (last is None):
            raise ValueError("--from and --to go together")
        if first is None:
            return cls()
        return cls(parse_day(first, "--from"), parse_day(last, "--to"))

    @property
    def everything(self) -> bool:
        return self.first is None

    def _bounds(self) -> tuple[str, str]:
        end = self.last + dt.timedelta(days=1)
        return f"{self.first.isoformat()}T00:00:00Z", f"{end.isoformat()}T00:00:00Z"

    def select(self, windows: pa.Table) -> pa.Table:
        """The rows of an Arrow table of windows that start on one of the days."""
        if self.everything:
            return windows
        low = dt.datetime.combine(self.first, dt.time(), dt.UTC)
        high = dt.datetime.combine(self.last + dt.timedelta(days=1), dt.time(), dt.UTC)
        starts = windows["window_start"]
        kind = starts.type
        keep = pc.and_(pc.greater_equal(starts, pa.scalar(low, kind)), pc.less(starts, pa.scalar(high, kind)))
        return windows.filter(keep)

    def contains(self, window_start: Column) -> Column:
        """Spark condition: the window starts on one of the days."""
        if self.everything:
            return F.lit(True)
        low, high = self._bounds()
        return (window_start >= F.to_timestamp(F.lit(low))) & (window_start < F.to_timestamp(F.lit(high)))

    def may_hold(self, event_time: Column, reach: int | None) -> Column:
        """Spark condition: an event at ``event_time`` may lie in a window starting on one of the
        days. ``reach``: the longest window (microseconds) for windows fixed on the clock, which
        start no later than the events they hold, so the times are ``[first day, last day + 1 day
        + reach)``; None (sessions, whose span has no bound) for every time."""
        if self.everything or reach is None:
            return F.lit(True)
        low, high = self._bounds()
        time = F.unix_micros(event_time)
        return (time >= F.unix_micros(F.to_timestamp(F.lit(low)))) & (
            time < F.unix_micros(F.to_timestamp(F.lit(high))) + F.lit(reach)
        )

    def predicate(self) -> str | None:
        """The same condition as SQL text for a Delta overwrite (None = the whole table)."""
        if self.everything:
            return None
        low, high = self._bounds()
        return _RANGE.format(column="window_start", low=low, high=high)

    def describe(self) -> str:
        if self.everything:
            return "every day"
        return str(self.first) if self.first == self.last else f"{self.first}..{self.last}"


def predicate_range(predicate: str | None) -> tuple[str, dt.datetime, dt.datetime] | None:
    """``(column, low, high)`` of a predicate ``DayRange.predicate`` wrote (the rows with ``low <=
    column < high``, UTC); None for any other text."""
    found = _RANGE_TEXT.match(predicate or "")
    if found is None:
        return None
    column, low, high = found.groups()
    return column, dt.datetime.fromisoformat(low), dt.datetime.fromisoformat(high)

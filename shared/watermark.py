"""Watermarks and lateness, with nothing dropped.

The watermark of micro-batch ``b`` is ``max event_time seen in batches before b - watermark_delay``
(Spark's definition); before any event it is unknown (null) and nothing is late. It never moves
backwards: it derives from a running maximum.

An event is *late for a window* when the watermark has reached that window's end plus the
allowed lateness: ``watermark >= window_end + allowed_lateness`` (the Flink/Beam rule; windows
are half-open, so a window ending at 15 is complete once the watermark is 15). An event behind
the watermark whose window is still open is on time. Between the window's end and the end of
the allowed lateness an event is a *late update*: it is counted and updates the (already final)
window. A window's status is ``final`` once ``watermark >= window_end``, else ``open``.
"""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F

__all__ = ["watermark_after", "is_late", "is_late_update", "window_status", "lateness_seconds"]


def watermark_after(max_event_micros: int | None, delay: int) -> int | None:
    """The watermark (microseconds) once events up to ``max_event_micros`` have been seen."""
    return None if max_event_micros is None else max_event_micros - delay


def _micros(value: int | None) -> Column:
    return F.lit(value).cast("long")


def is_late(window_end: Column, watermark: int | None, allowed_lateness: int) -> Column:
    """True where the window no longer takes events (false while the watermark is unknown)."""
    if watermark is None:
        return F.lit(False)
    return _micros(watermark) >= F.unix_micros(window_end) + F.lit(allowed_lateness)


def is_late_update(window_end: Column, watermark: int | None, allowed_lateness: int) -> Column:
    """True where the window is final but still within the allowed lateness."""
    if watermark is None:
        return F.lit(False)
    return (_micros(watermark) >= F.unix_micros(window_end)) & ~is_late(window_end, watermark, allowed_lateness)


def window_status(window_end: Column, watermark: int | None) -> Column:
    """``final`` once the watermark has reached the window's end, else ``open``."""
    if watermark is None:
        return F.lit("open")
    return F.when(_micros(watermark) >= F.unix_micros(window_end), "final").otherwise("open")


def lateness_seconds(event_time: Column, watermark: int | None) -> Column:
    """How far the event's time was behind the watermark it missed, in exact seconds."""
    return ((_micros(watermark) - F.unix_micros(event_time)).cast("decimal(20,0)") / F.lit(1_000_000)).cast(
        "decimal(20,6)"
    )

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

The column builders take column names and a watermark in microseconds (None: not known yet).
"""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F

__all__ = ["watermark_after", "is_late", "is_late_update", "window_status", "lateness_seconds"]


def watermark_after(max_event_micros: int | None, delay: int) -> int | None:
    """The watermark (microseconds) once events up to ``max_event_micros`` have been seen."""
    return None if max_event_micros is None else max_event_micros - delay


def is_late(window_end: str, watermark: int | None, allowed_lateness: int) -> Column:
    """True where the window no longer takes events (false while the watermark is unknown)."""
    return F.expr(_is_late(window_end, watermark, allowed_lateness))


def is_late_update(window_end: str, watermark: int | None, allowed_lateness: int) -> Column:
    """True where the window is final but still within the allowed lateness."""
    if watermark is None:
        return F.lit(False)
    final = f"{_long(watermark)} >= unix_micros({window_end})"
    return F.expr(f"{final} AND NOT ({_is_late(window_end, watermark, allowed_lateness)})")


def window_status(window_end: str, watermark: int | None) -> Column:
    """``final`` once the watermark has reached the window's end, else ``open``."""
    if watermark is None:
        return F.lit("open")
    return F.expr(f"CASE WHEN {_long(watermark)} >= unix_micros({window_end}) THEN 'final' ELSE 'open' END")


def lateness_seconds(event_time: str, watermark: int | None) -> Column:
    """How far the event's time was behind the watermark it missed, in exact seconds."""
    return F.expr(
        f"CAST(CAST({_long(watermark)} - unix_micros({event_time}) AS DECIMAL(20,0)) / 1000000 AS DECIMAL(20,6))"
    )


# The builders write SQL text: one round trip to the JVM per column instead of one per operator
# (they run for every micro-batch, with that batch's watermark).
def _long(value: int | None) -> str:
    return "CAST(NULL AS BIGINT)" if value is None else f"{int(value)}L"


def _is_late(window_end: str, watermark: int | None, allowed_lateness: int) -> str:
    if watermark is None:
        return "false"
    return f"{_long(watermark)} >= unix_micros({window_end}) + {_long(allowed_lateness)}"

"""Lateness rules against a watermark, with nothing dropped.

The watermark a line is judged by is the log clock's (``shared.clock``): ``max event time of the
lines before the current processing-time tick - watermark_delay``, never decreasing; before any
event it is unknown (``NO_TIME``) and nothing is late.

An event is *late for a window* when the watermark has reached that window's end plus the
allowed lateness: ``watermark >= window_end + allowed_lateness`` (the Flink/Beam rule; windows
are half-open, so a window ending at 15 is complete once the watermark is 15). An event behind
the watermark whose window is still open is on time. Between the window's end and the end of
the allowed lateness an event is a *late update*: it is counted and updates the (already final)
window. A window's status is ``final`` once ``watermark >= window_end``, else ``open``.

The rules take window ends and event times as integer microseconds (NumPy arrays) and the
watermark per row (an array) or for all rows (a scalar); ``NO_TIME`` or None is unknown.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from shared.clock import NO_TIME

__all__ = ["LATENESS_TYPE", "is_late", "is_late_update", "is_final", "window_status", "lateness_seconds"]

LATENESS_TYPE = pa.decimal128(20, 6)  # seconds, exact to the microsecond
_MICROS = pa.scalar(1_000_000, pa.decimal128(7, 0))


def _per_row(watermark, count: int) -> np.ndarray:
    if watermark is None:
        return np.full(count, NO_TIME, dtype=np.int64)
    return np.broadcast_to(np.asarray(watermark, dtype=np.int64), (count,))


def is_late(window_end: np.ndarray, watermark, allowed_lateness: int) -> np.ndarray:
    """True where the window no longer takes events (false while the watermark is unknown)."""
    marks = _per_row(watermark, len(window_end))
    return (marks != NO_TIME) & (marks >= np.asarray(window_end) + allowed_lateness)


def is_final(window_end: np.ndarray, watermark) -> np.ndarray:
    """True where the watermark has reached the window's end."""
    marks = _per_row(watermark, len(window_end))
    return (marks != NO_TIME) & (marks >= np.asarray(window_end))


def is_late_update(window_end: np.ndarray, watermark, allowed_lateness: int) -> np.ndarray:
    """True where the window is final but still within the allowed lateness."""
    return is_final(window_end, watermark) & ~is_late(window_end, watermark, allowed_lateness)


def window_status(window_end: np.ndarray, watermark) -> pa.Array:
    """``final`` once the watermark has reached the window's end, else ``open``."""
    return pa.array(np.where(is_final(window_end, watermark), "final", "open"), pa.string())


def lateness_seconds(event_time: np.ndarray, watermark) -> pa.Array:
    """How far each event's time was behind the watermark it missed, in exact seconds (null
    where the watermark is unknown)."""
    marks = _per_row(watermark, len(event_time))
    behind = pa.array(marks - np.asarray(event_time, dtype=np.int64), pa.int64(), mask=marks == NO_TIME)
    return pc.divide(behind.cast(pa.decimal128(26, 6)), _MICROS).cast(LATENESS_TYPE)

"""Watermarks and lateness, with nothing dropped.

The watermark of micro-batch ``b`` is ``max event_time seen in batches before b - watermark_delay``
(Spark's definition); before any event it is unknown (None) and nothing is late. It never moves
backwards: it derives from a running maximum.

An event is *late for a window* when the watermark has reached that window's end plus the
allowed lateness: ``watermark >= window_end + allowed_lateness`` (the Flink/Beam rule; windows
are half-open, so a window ending at 15 is complete once the watermark is 15). An event behind
the watermark whose window is still open is on time. Between the window's end and the end of
the allowed lateness an event is a *late update*: it is counted and updates the (already final)
window. A window's status is ``final`` once ``watermark >= window_end``, else ``open``.

The rules take window ends and event times as integer microseconds (NumPy arrays) and a
watermark in microseconds (None: not known yet).
"""

from __future__ import annotations

from decimal import Decimal

import numpy as np
import pyarrow as pa

__all__ = ["LATENESS_TYPE", "watermark_after", "is_late", "is_late_update", "is_final", "window_status", "lateness_seconds"]

LATENESS_TYPE = pa.decimal128(20, 6)  # seconds, exact to the microsecond


def watermark_after(max_event_micros: int | None, delay: int) -> int | None:
    """The watermark (microseconds) once events up to ``max_event_micros`` have been seen."""
    return None if max_event_micros is None else max_event_micros - delay


def is_late(window_end: np.ndarray, watermark: int | None, allowed_lateness: int) -> np.ndarray:
    """True where the window no longer takes events (false while the watermark is unknown)."""
    if watermark is None:
        return np.zeros(len(window_end), dtype=bool)
    return watermark >= window_end + allowed_lateness


def is_final(window_end: np.ndarray, watermark: int | None) -> np.ndarray:
    """True where the watermark has reached the window's end."""
    if watermark is None:
        return np.zeros(len(window_end), dtype=bool)
    return watermark >= window_end


def is_late_update(window_end: np.ndarray, watermark: int | None, allowed_lateness: int) -> np.ndarray:
    """True where the window is final but still within the allowed lateness."""
    return is_final(window_end, watermark) & ~is_late(window_end, watermark, allowed_lateness)


def window_status(window_end: np.ndarray, watermark: int | None) -> pa.Array:
    """``final`` once the watermark has reached the window's end, else ``open``."""
    return pa.array(np.where(is_final(window_end, watermark), "final", "open"), pa.string())


def lateness_seconds(event_time: np.ndarray, watermark: int | None) -> pa.Array:
    """How far each event's time was behind the watermark it missed, in exact seconds."""
    if watermark is None:
        return pa.nulls(len(event_time), LATENESS_TYPE)
    return pa.array([Decimal(int(watermark - t)).scaleb(-6) for t in event_time], LATENESS_TYPE)

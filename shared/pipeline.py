"""The transformation chain that batch and streaming share.

``parse_events`` (in ``shared.events``) types and validates lines; ``classify_lines`` sorts every
parsed line into exactly one place: a deduplicated event, a
duplicate, or a dead letter. ``window_totals`` turns events into per-window totals. Jobs add only
source, sink, trigger and checkpoint around these.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from pyspark.sql import DataFrame

from shared.aggregation import aggregate_windows
from shared.dedup import first_copies, later_copies, mark_duplicates
from shared.events import rejected_lines, valid_events
from shared.windows import WindowSpec, assign_windows

__all__ = ["LineDispositions", "classify_lines", "window_totals"]


@dataclass(frozen=True)
class LineDispositions:
    """Every input line in exactly one of three DataFrames."""

    events: DataFrame
    duplicates: DataFrame
    dead_letters: DataFrame


def classify_lines(parsed: DataFrame) -> LineDispositions:
    """Split a complete set of parsed lines (``parse_events`` output) three ways (batch view).

    Validation comes first: a rejected line never takes an ``event_id``, so a bad copy cannot
    shadow the good one.
    """
    marked = parsed.transform(valid_events).transform(mark_duplicates)
    return LineDispositions(
        events=marked.transform(first_copies),
        duplicates=marked.transform(later_copies),
        dead_letters=parsed.transform(rejected_lines),
    )


def window_totals(spec: WindowSpec) -> Callable[[DataFrame], DataFrame]:
    """Events -> one row per window and key with ``event_count`` and ``amount_total``."""
    return lambda events: events.transform(assign_windows(spec)).transform(aggregate_windows)

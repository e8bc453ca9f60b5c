"""Live latency: how long a line waited, from its publication in the log to its result's commit.

A line's latency is the wall-clock time from the moment its segment was published in the log
(linked into place under its final name, ``shared.eventlog``: the segment file's change time)
to the moment the micro-batch that read it had committed its outputs, the rows a consumer
reads (``committed_at``: after every output table's commit, before the metrics row and the
state are written). A file's times come from the kernel's coarse clock, up to one tick (1-10
ms) behind the wall clock: a wait is known to about a hundredth of a second. Every line of a segment shares its segment's publication, so a
micro-batch's latencies are one value per segment, weighted by the segment's lines.

What a live stream's metrics row records of them (``LATENCY_FIELDS``, set by the live runner;
null in a replay's rows, which are not served live): ``committed_at`` and the nearest-rank
p50, p95 and maximum over the batch's lines, in seconds. A line read long after its
publication (a stream catching up on a backlog, or one started over a log written before it)
counts its whole wait: latency is what a consumer of the line waited, not what the batch cost.
A micro-batch that read no line (or only lines of segments no longer on disk) has a
``committed_at`` and null latencies.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from shared.catalog import LATENCY_COLUMNS
from shared.line_rows import UTC_MICROS

__all__ = ["LATENCY_FIELDS", "LATENCY_COLUMNS", "LineLatency", "lines_per_segment", "line_latency", "with_latency"]

# committed_at, then the p50, p95 and maximum in seconds
LATENCY_FIELDS = (
    pa.field(LATENCY_COLUMNS[0], UTC_MICROS),
    *(pa.field(name, pa.float64()) for name in LATENCY_COLUMNS[1:]),
)


@dataclass(frozen=True)
class LineLatency:
    """One micro-batch's live latency: ``committed_at`` (Unix seconds), ``lines`` measured, and
    the nearest-rank quantiles over them in seconds (None: no line measured)."""

    committed_at: float
    lines: int
    p50: float | None
    p95: float | None
    max: float | None


def lines_per_segment(parsed: pa.Table) -> dict[int, int]:
    """``{segment: lines}`` of a micro-batch's lines (``parsed`` has a ``segment`` column)."""
    if parsed.num_rows == 0:
        return {}
    counts = pc.value_counts(parsed["segment"]).to_pylist()
    return {row["values"]: row["counts"] for row in counts if row["values"] is not None}


def _nearest_rank(waits: list[tuple[float, int]], total: int, quantile: float) -> float:
    """The smallest wait that at least ``ceil(quantile * total)`` lines do not exceed."""
    rank, seen = max(1, math.ceil(quantile * total)), 0
    for wait, lines in waits:
        seen += lines
        if seen >= rank:
            return wait
    return waits[-1][0]


def line_latency(lines: Mapping[int, int], published: Mapping[int, float | None], committed_at: float) -> LineLatency:
    """The latency of a micro-batch that read ``lines`` (``{segment: lines}``), its segments
    published at ``published`` (Unix seconds; None: unknown, its lines not measured), committed
    at ``committed_at``. A wait below zero (a clock stepped back) counts as zero."""
    waits = sorted(
        (max(0.0, committed_at - published[segment]), count)
        for segment, count in lines.items()
        if published.get(segment) is not None and count
    )
    total = sum(count for _, count in waits)
    if not total:
        return LineLatency(committed_at, 0, None, None, None)
    p50, p95 = (round(_nearest_rank(waits, total, q), 6) for q in (0.5, 0.95))
    return LineLatency(committed_at, total, p50, p95, round(waits[-1][0], 6))


def with_latency(rows: pa.Table, latency: LineLatency) -> pa.Table:
    """A metrics row (``rows``, whose schema ends with ``LATENCY_FIELDS``) with ``latency`` set."""
    values = {
        "committed_at": pa.array([round(latency.committed_at * 1e6)] * rows.num_rows, pa.int64()).cast(UTC_MICROS),
        "latency_p50_seconds": pa.array([latency.p50] * rows.num_rows, pa.float64()),
        "latency_p95_seconds": pa.array([latency.p95] * rows.num_rows, pa.float64()),
        "latency_max_seconds": pa.array([latency.max] * rows.num_rows, pa.float64()),
    }
    for name, column in values.items():
        rows = rows.set_column(rows.schema.get_field_index(name), rows.schema.field(name), column)
    return rows

"""A live micro-batch's line latency: the waits of its lines, from publication to commit.

What the figures mean and where they are recorded: ``shared.live_latency``. Here they are
computed (by the live runner, ``lklab.live_stream``) with the lab's one percentile,
``reconciliation.result.weighted_waits``: every line of a segment waited as long as its
segment, so the waits are one value per segment, counted once per line.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from reconciliation.result import weighted_waits
from shared.live_latency import LATENCY_COLUMNS, LATENCY_FIELDS

__all__ = ["LineLatency", "lines_per_segment", "line_latency", "with_latency"]


@dataclass(frozen=True)
class LineLatency:
    """One micro-batch's live latency: ``committed_at`` (Unix seconds), ``lines`` measured, the
    nearest-rank quantiles over them in seconds (None: no line measured), and when the batch
    began, ``started_at`` (Unix seconds; None: not known)."""

    committed_at: float
    lines: int
    p50: float | None
    p95: float | None
    max: float | None
    started_at: float | None = None


def lines_per_segment(parsed: pa.Table) -> dict[int, int]:
    """``{segment: lines}`` of a micro-batch's lines (``parsed`` has a ``segment`` column)."""
    if parsed.num_rows == 0:
        return {}
    counts = pc.value_counts(parsed["segment"]).to_pylist()
    return {row["values"]: row["counts"] for row in counts if row["values"] is not None}


def line_latency(
    lines: Mapping[int, int],
    published: Mapping[int, float | None],
    committed_at: float,
    started_at: float | None = None,
) -> LineLatency:
    """The latency of a micro-batch that began at ``started_at`` and read ``lines``
    (``{segment: lines}``), its segments published at ``published`` (Unix seconds; None:
    unknown, its lines not measured), committed at ``committed_at``. A wait below zero (a clock
    stepped back) counts as zero."""
    summary = weighted_waits(
        (max(0.0, committed_at - published[segment]), count)
        for segment, count in lines.items()
        if published.get(segment) is not None
    )
    if summary is None:
        return LineLatency(committed_at, 0, None, None, None, started_at)
    return LineLatency(committed_at, *summary, started_at)


def with_latency(rows: pa.Table, latency: LineLatency) -> pa.Table:
    """A metrics row (``rows``, whose schema ends with ``LATENCY_FIELDS``) with ``latency`` set."""
    committed, p50, p95, largest, started = LATENCY_COLUMNS
    micros = lambda seconds: None if seconds is None else round(seconds * 1e6)
    values = {
        committed: micros(latency.committed_at),
        p50: latency.p50,
        p95: latency.p95,
        largest: latency.max,
        started: micros(latency.started_at),
    }
    for field in LATENCY_FIELDS:
        timestamp = field.name in (committed, started)
        column = pa.array([values[field.name]] * rows.num_rows, pa.int64() if timestamp else field.type)
        rows = rows.set_column(rows.schema.get_field_index(field.name), field, column.cast(field.type))
    return rows

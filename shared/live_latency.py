"""Live latency: how long a line waited, from its publication in the log to its result's commit.

A line's latency is the wall-clock time from the moment its segment was published in the log
(linked into place under its final name, ``shared.eventlog``: the segment file's change time)
to the moment the micro-batch that read it had committed its outputs, the rows a consumer
reads (``committed_at``: after every output table's commit, before the metrics row and the
state are written). A file's times come from the kernel's coarse clock, up to one tick (1-10
ms) behind the wall clock: a wait is known to about a hundredth of a second. Every line of a
segment shares its segment's publication, so a micro-batch's latencies are one value per
segment, weighted by the segment's lines.

What a live stream's metrics row records of them (``LATENCY_FIELDS``; the live runner computes
and sets them, ``lklab.line_latency``; null in a replay's rows, which are not served live): ``committed_at`` and the nearest-rank
p50, p95 and maximum over the batch's lines, in seconds. A line read long after its
publication (a stream catching up on a backlog, or one started over a log written before it)
counts its whole wait: latency is what a consumer of the line waited, not what the batch cost.
A micro-batch that read no line (or only lines of segments no longer on disk) has a
``committed_at`` and null latencies.

``started_at`` is when the micro-batch began (its ``foreachBatch`` call, after the query had
listed its segments): ``committed_at - started_at`` is the batch's own time to commit, what a
line waits behind no backlog beyond its trigger's wait, and does not depend on how long the
log waited for the stream (the comparison reports it per configuration).
"""

from __future__ import annotations

from datetime import datetime

import pyarrow as pa

from shared.catalog import LATENCY_COLUMNS
from shared.line_rows import UTC_MICROS

__all__ = ["LATENCY_FIELDS", "LATENCY_COLUMNS", "start_to_commit"]

# committed_at, the p50, p95 and maximum in seconds, started_at
LATENCY_FIELDS = tuple(pa.field(name, UTC_MICROS if name.endswith("_at") else pa.float64()) for name in LATENCY_COLUMNS)


def start_to_commit(started_at: datetime, committed_at: datetime) -> float:
    """A micro-batch's seconds from its start to its commit (its metrics row's ``started_at`` and
    ``committed_at``); below zero (a clock stepped back) counts as zero."""
    return max(0.0, (committed_at - started_at).total_seconds())

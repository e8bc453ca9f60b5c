"""One row per ``unique_visitors`` micro-batch: the segments it read and where its lines went.

Every line of a batch is exactly one of: a first copy of a view (``views``), a ``duplicate``, a
``dead_letter`` or a ``heartbeat``, so ``input_lines = views + duplicates + dead_letters +
heartbeats``. A view's (view, window) pairs are ``new_urls + repeats + late_pairs``.
``duration_seconds``: from the start of the batch until its rows were ready to commit (in a
replay, the executor task's time for that micro-batch; null in rows written before it was
recorded).
``last_segment`` of the latest row is how far the stream has read the log (a reconciliation's
``read_through``). Watermarks are UTC timestamps (null: not known yet).
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from lklab.pipelines.unique_visitors.step import VisitorBatch
from shared.micro_batch import metrics_row, metrics_schema

__all__ = ["VISITOR_METRICS_SCHEMA", "visitor_metrics_row"]

_COUNTS = (
    "input_lines",
    "views",
    "duplicates",
    "dead_letters",
    "heartbeats",
    "new_urls",
    "repeats",
    "late_pairs",
    "state_entries",
)
VISITOR_METRICS_SCHEMA = metrics_schema(_COUNTS, pa.field("duration_seconds", pa.float64()))


def _sum(table: pa.Table, column: str) -> int:
    return int(pc.sum(table[column]).as_py() or 0) if table.num_rows else 0


def visitor_metrics_row(batch_id: int, parsed: pa.Table, step: VisitorBatch, seconds: float | None) -> pa.Table:
    """The metrics row of micro-batch ``batch_id`` (``parsed``: its lines, ``step``: where they
    went, ``seconds``: how long it took)."""
    return metrics_row(
        VISITOR_METRICS_SCHEMA,
        batch_id,
        parsed,
        step,
        views=step.outcomes.num_rows,
        new_urls=_sum(step.outcomes, "new_urls"),
        repeats=_sum(step.outcomes, "repeats"),
        late_pairs=_sum(step.outcomes, "late_pairs"),
        state_entries=step.state_entries,
        duration_seconds=seconds,
    )

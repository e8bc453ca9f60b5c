"""One row per ``unique_visitors`` micro-batch: the segments it read and where its lines went.

Every line of a batch is exactly one of: a first copy of a view (``views``), a ``duplicate``, a
``dead_letter`` or a ``heartbeat``, so ``input_lines = views + duplicates + dead_letters +
heartbeats``. A view's (view, window) pairs are ``new_urls + repeats + late_pairs``.
``last_segment`` of the latest row is how far the stream has read the log (a reconciliation's
``read_through``). Watermarks are UTC timestamps (null: not known yet).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from shared.events import UTC_MICROS
from shared.visitors_stream import VisitorBatch

__all__ = ["VISITOR_METRICS_SCHEMA", "visitor_metrics_row"]

_COUNTS = ("input_lines", "views", "duplicates", "dead_letters", "heartbeats", "new_urls", "repeats", "late_pairs", "state_entries")
VISITOR_METRICS_SCHEMA = pa.schema(
    [
        pa.field("batch_id", pa.int64(), nullable=False),
        pa.field("first_segment", pa.int64()),
        pa.field("last_segment", pa.int64()),
        *[pa.field(name, pa.int64()) for name in _COUNTS],
        pa.field("watermark", UTC_MICROS),
        pa.field("next_watermark", UTC_MICROS),
    ]
)


def _sum(table: pa.Table, column: str) -> int:
    return int(pc.sum(table[column]).as_py() or 0) if table.num_rows else 0


def visitor_metrics_row(batch_id: int, parsed: pa.Table, step: VisitorBatch) -> pa.Table:
    """The metrics row of micro-batch ``batch_id`` (``parsed``: its lines, ``step``: where they went)."""
    segments = parsed["segment"].to_numpy() if parsed.num_rows else np.zeros(0, np.int64)
    row = {
        "batch_id": [batch_id],
        "first_segment": [int(segments.min()) if len(segments) else None],
        "last_segment": [int(segments.max()) if len(segments) else None],
        "input_lines": [step.input_lines],
        "views": [step.outcomes.num_rows],
        "duplicates": [step.duplicates.num_rows],
        "dead_letters": [step.dead_letters.num_rows],
        "heartbeats": [step.heartbeats],
        "new_urls": [_sum(step.outcomes, "new_urls")],
        "repeats": [_sum(step.outcomes, "repeats")],
        "late_pairs": [_sum(step.outcomes, "late_pairs")],
        "state_entries": [step.state_entries],
        "watermark": pa.array([step.watermark], pa.int64()).cast(UTC_MICROS),
        "next_watermark": pa.array([step.next_watermark], pa.int64()).cast(UTC_MICROS),
    }
    return pa.table(row).cast(VISITOR_METRICS_SCHEMA)

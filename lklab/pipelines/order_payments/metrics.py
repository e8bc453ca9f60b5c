"""``payments_stream_metrics``: one row per micro-batch of the order-payment join.

The segment range read and its input lines; where the lines went (``events + duplicates +
dead_letters + heartbeats == input_lines`` in every batch, ``events = on_time + late``); the rows
the batch made final (``matched`` pairs, ``unpaid`` orders, ``orphans``); the watermark its first
line was judged by and the one in force after its last (``lklab.pipelines.order_payments.rule.JoinBatch``); the
state rows kept after it; ``duration_seconds`` from the start of the batch until its rows were
ready to commit (in a replay, the executor task's time for that micro-batch).

The stream's ``last_segment`` read is the largest ``last_segment`` here: a reconciliation calls
a line beyond it ``unread``.
"""

from __future__ import annotations

import pyarrow as pa

from lklab.pipelines.order_payments.rule import JoinBatch
from shared.micro_batch import metrics_row, metrics_schema

__all__ = ["JOIN_METRICS_SCHEMA", "join_metrics_row"]

_COUNTS = (
    "input_lines",
    "on_time",
    "late",
    "duplicates",
    "dead_letters",
    "heartbeats",
    "matched",
    "unpaid",
    "orphans",
    "state_rows",
)
JOIN_METRICS_SCHEMA = metrics_schema(_COUNTS, pa.field("duration_seconds", pa.float64()))


def join_metrics_row(batch_id: int, parsed: pa.Table, step: JoinBatch, seconds: float | None) -> pa.Table:
    """The metrics row of micro-batch ``batch_id`` (``parsed``: the lines it read)."""
    events = step.input_lines - step.duplicates.num_rows - step.dead_letters.num_rows - step.heartbeats
    return metrics_row(
        JOIN_METRICS_SCHEMA,
        batch_id,
        parsed,
        step,
        on_time=events - step.late.num_rows,
        late=step.late.num_rows,
        matched=step.matched.num_rows,
        unpaid=step.unpaid.num_rows,
        orphans=step.orphans.num_rows,
        state_rows=step.state_rows,
        duration_seconds=seconds,
    )

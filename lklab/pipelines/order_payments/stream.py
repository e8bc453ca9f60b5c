"""The order-payment join as a stream: the live layer and its Kappa replay.

**Live** (``run_payments_speed``): a Structured Streaming query over the log source
(``shared.log_source``, ``segments_per_batch`` segments per micro-batch, offsets in the
checkpoint ``<lake>/checkpoints/<prefix>payments``). Each micro-batch's raw lines are collected
once as Arrow, parsed by ``parse_order_lines`` and classified by ``join_step`` against the state
carried in memory from the batch before (read from ``payments_state`` when a process starts).
Exactly once through the sink of every stream (``lklab.stream_sink``): each output table gets
at most one Delta commit per batch, tagged ``(app_id, batch_id)`` and skipped when already
committed; ``payments_state`` is written last, so a batch replayed after a crash reads the state
from before it, and a batch whose state is committed is skipped whole. Side outputs without rows
commit nothing once their table exists. Crash points
(``lklab.crash_points``: ``start``, ``before:``/``after:`` each table, the state last) let the
tests kill it anywhere in a batch (``tests/test_payments_jobs.py``). Always on (without
``available_now``), it appends a heartbeat to a log quiet for ``heartbeat-interval`` while it
holds an order or payment with no match yet (``lklab.heartbeats``): the watermark then moves
past their intervals, and they become final unpaid orders and orphans without new traffic.

**Replay**: ``PAYMENTS_RULE`` run over the whole log by the Kappa replay runner
(``lklab.replay_runner.replay_on_executors``) into ``kappa/<name>/``: the rows a live run reading
one segment per micro-batch writes (batch ``k`` is the ``k+1``-th segment), walked in one
executor task, nothing of the log on the driver. Rows do not depend on the cuts
(``tests/test_order_payments.py``), so this is faithful without streaming.
"""

from __future__ import annotations

import time

import pyarrow as pa
import pyarrow.compute as pc

from lklab.live_stream import StateKind, StepOutput, StreamRule
from lklab.pipelines.order_payments.metrics import join_metrics_row
from lklab.pipelines.order_payments.parse import parse_order_lines
from lklab.pipelines.order_payments.rule import JoinBatch, JoinSettings, join_step
from lklab.pipelines.order_payments.state import JoinState, join_state_from_table, join_state_table
from lklab.pipelines.order_payments.tables import (
    PAYMENTS_DEAD_LETTER,
    PAYMENTS_DUPLICATES,
    PAYMENTS_LATE_EVENTS,
    PAYMENTS_MATCHED,
    PAYMENTS_ORPHANS,
    PAYMENTS_STATE,
    PAYMENTS_STREAM_METRICS,
    PAYMENTS_TABLES,
    PAYMENTS_UNPAID,
)
from lklab.stream_sink import stream_layout
from shared import catalog
from shared.config import LabConfig
from shared.table_settings import interval_join_settings

__all__ = [
    "SPEED_APP",
    "join_settings",
    "PAYMENTS_RULE",
    "run_payments_speed",
]


SPEED_APP = "payments"  # the app id of the live stream's commits


def join_settings(config: LabConfig) -> JoinSettings:
    """The stream step's settings from the lab's configuration (the tables record them as
    ``shared.table_settings.interval_join_settings``)."""
    return JoinSettings(
        bound=config.join_bound,
        watermark_delay=config.watermark_delay,
        watermark_interval=config.watermark_interval,
        dedup_horizon=config.dedup_horizon,
        allowed_lateness=config.allowed_lateness,
    )


def _outputs(step: JoinBatch, metrics: pa.Table) -> dict[catalog.Table, pa.Table]:
    return {
        PAYMENTS_MATCHED: step.matched,
        PAYMENTS_UNPAID: step.unpaid,
        PAYMENTS_ORPHANS: step.orphans,
        PAYMENTS_LATE_EVENTS: step.late,
        PAYMENTS_DUPLICATES: step.duplicates,
        PAYMENTS_DEAD_LETTER: step.dead_letters,
        PAYMENTS_STREAM_METRICS: metrics,
    }


def _read(lines: pa.Table, config: LabConfig) -> pa.Table:
    return parse_order_lines(lines, config.max_clock_skew)


def _step(parsed: pa.Table, state: JoinState, settings: JoinSettings, batch_id: int, started: float) -> StepOutput:
    step = join_step(parsed, state, settings, batch_id)
    metrics = join_metrics_row(batch_id, parsed, step, time.monotonic() - started)
    logged = {k: v for k, v in metrics.to_pylist()[0].items() if "watermark" not in k and k != "batch_id"}
    return StepOutput({**_outputs(step, metrics), PAYMENTS_STATE: join_state_table(step.state)}, step.state, logged)


def _holds_open(state: JoinState, settings: JoinSettings) -> bool:
    """An order or payment with no match yet is held: a later watermark makes it unpaid or an orphan."""
    return any(pc.any(pc.invert(held["matched"].fill_null(False))).as_py() for held in (state.orders, state.payments))


# The order-payment join's stream for the live runner (``lklab.live_stream``).
PAYMENTS_RULE = StreamRule(
    what="order_payments stream",
    app_id=SPEED_APP,
    layout=stream_layout(PAYMENTS_TABLES),  # every output appended, the state last
    settings=join_settings,
    table_settings=interval_join_settings,
    state=StateKind(JoinState.empty, join_state_from_table, _holds_open),
    step=_step,
    read=_read,
)
run_payments_speed = PAYMENTS_RULE.run

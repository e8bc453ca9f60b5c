"""The ``running_max`` stream for the live runner (``lklab.live_stream``): what differs, nothing else.

Lines are collected raw and parsed in Arrow (``parse``); ``rule.max_step`` sends each one
somewhere against the state carried from the batch before; the sink (``lklab.stream_sink``)
commits ``max_stream`` (merged by key), the duplicates, the dead letters and the metrics side
by side, then ``max_state``. Its tables record the line settings their rows depend on.
"""

from __future__ import annotations

import pyarrow as pa

from lklab.live_stream import StateKind, StepOutput, StreamRule
from lklab.pipelines.running_max.parse import parse_readings
from lklab.pipelines.running_max.rule import MaxState, max_step, state_from_table, state_table
from lklab.pipelines.running_max.tables import (
    MAX_DEAD_LETTER,
    MAX_DUPLICATES,
    MAX_STATE,
    MAX_STREAM,
    MAX_STREAM_METRICS,
    MAX_STREAM_TABLES,
)
from lklab.stream_sink import stream_layout
from shared.config import LabConfig
from shared.table_settings import line_settings

__all__ = ["MAX_RULE"]


def _read(lines: pa.Table, config: LabConfig) -> pa.Table:
    return parse_readings(lines, config.max_clock_skew)


def _step(parsed: pa.Table, state: MaxState, settings: None, batch_id: int, started: float) -> StepOutput:
    batch = max_step(parsed, state, batch_id)
    rows = {
        MAX_DEAD_LETTER: batch.dead_letters,
        MAX_DUPLICATES: batch.duplicates,
        MAX_STREAM: batch.changes,
        MAX_STREAM_METRICS: batch.metrics,
        MAX_STATE: state_table(batch.state),
    }
    figures = {k: v for k, v in batch.metrics.to_pylist()[0].items() if k != "batch_id"}
    return StepOutput(rows, batch.state, figures)


MAX_RULE = StreamRule(
    what="running_max stream",
    app_id="max-speed",
    layout=stream_layout(MAX_STREAM_TABLES, merged={MAX_STREAM: ("key",)}),
    table_settings=line_settings,  # what makes a line a dead letter: the rows depend on nothing else
    state=StateKind(MaxState, state_from_table),
    step=_step,
    read=_read,
    logger="lklab.running_max",
)

"""The ``unique_visitors`` speed layer: Structured Streaming over the log, distinct URLs per window.

Source: the log (``shared.log_source``), ``segments_per_batch`` segments per micro-batch, offsets
in Spark's checkpoint (``<lake>/checkpoints/<prefix>visitors-speed``), parsed by
``parse_page_views`` inside the streaming query. Each micro-batch is collected once as Arrow and
``lklab.pipelines.unique_visitors.step.visitors_step`` decides where every line goes, against the state carried
in memory from the batch before (read from ``visitors_state`` when the process starts). What it
decides depends on the log alone, not on how it is cut into micro-batches.

Exactly once, as the billing speed layer (``lklab.pipelines.billing_windows.speed``): every write is a Delta commit
tagged ``(app_id, batch_id)`` and skipped when already committed. ``visitors_seen`` (each user's
URLs seen within the state TTL, ``lklab.pipelines.unique_visitors.state.seen_table``) is rewritten after each
batch, and ``visitors_state`` is written last, so a micro-batch replayed after a crash starts
from the state before it and commits nothing twice, and one whose state is already committed is
skipped whole: ``lklab.stream_sink``, the sink of every stream, with this stream's ``LAYOUT``. The Kappa replay
runs this same rule over the whole log on the executors (``lklab.replay_runner``). Crash points (``lklab.crash_points``: ``start``,
``before:``/``after:`` each table) let the tests kill it anywhere in a batch
(``tests/test_visitors_jobs.py``). How it runs is every stream's (``lklab.live_stream``); this
module is its ``StreamRule``.

Always on (without ``available_now``), it appends a heartbeat to a log quiet for
``heartbeat-interval`` while it holds windows the watermark has not made final
(``lklab.heartbeats``), so they become final without new traffic.
"""

from __future__ import annotations

import time

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import SparkSession

from lklab.live_stream import StateKind, StepOutput, StreamRule
from lklab.pipelines.unique_visitors.metrics import visitor_metrics_row
from lklab.pipelines.unique_visitors.parse import PARSED_SCHEMA, parse_page_views
from lklab.pipelines.unique_visitors.rule import WINDOW_KEY
from lklab.pipelines.unique_visitors.state import VisitorState, seen_table, state_from_table, state_table
from lklab.pipelines.unique_visitors.step import VisitorBatch, VisitorSettings, visitors_step
from lklab.pipelines.unique_visitors.tables import (
    VISITORS_DEAD_LETTER,
    VISITORS_DUPLICATES,
    VISITORS_LATE_EVENTS,
    VISITORS_MEMBERS,
    VISITORS_SEEN,
    VISITORS_SPEED_TABLES,
    VISITORS_STATE,
    VISITORS_STREAM_METRICS,
    VISITORS_WINDOWS,
)
from lklab.replay_runner import ReplayRun, replay_on_executors, segments_per_batch_of
from lklab.stream_sink import stream_layout
from shared import catalog
from shared.config import LabConfig
from shared.table_settings import stream_settings
from shared.watermark import is_final
from shared.windows import micros

__all__ = [
    "APP_ID",
    "COMMIT_ORDER",
    "LAYOUT",
    "batch_rows",
    "VISITORS_RULE",
    "run_visitors_speed",
    "replay_visitors",
    "REPLAY_BATCH_BYTES",
    "visitor_settings",
    "visitors_table_settings",
]

APP_ID = "visitors-speed"


def visitor_settings(config: LabConfig) -> VisitorSettings:
    """The stream step's settings from the lab's configuration."""
    return VisitorSettings(
        config.window,
        config.watermark_delay,
        config.allowed_lateness,
        config.dedup_horizon,
        config.state_ttl,
        config.watermark_interval,
    )


def visitors_table_settings(config: LabConfig) -> dict[str, str]:
    """What the stream's tables record (``shared.table_settings``): the stream's settings and the state TTL."""
    return {**stream_settings(config), "state-ttl": config.describe()["state-ttl"]}


# The tables a micro-batch commits (``lklab.stream_sink``): the outputs side by side, the state last.
# A served window's row is never deleted; the seen set is a snapshot, as the state.
LAYOUT = stream_layout(VISITORS_SPEED_TABLES, merged={VISITORS_WINDOWS: WINDOW_KEY}, snapshots=(VISITORS_SEEN,))
COMMIT_ORDER = tuple(entry.table for entry in LAYOUT)


def batch_rows(
    batch_id: int, parsed: pa.Table, step: VisitorBatch, seconds: float | None
) -> dict[catalog.Table, pa.Table]:
    """What micro-batch ``batch_id`` commits to each table (``parsed``: the lines it read,
    ``seconds``: how long its step took)."""
    return {
        VISITORS_DEAD_LETTER: step.dead_letters,
        VISITORS_DUPLICATES: step.duplicates,
        VISITORS_LATE_EVENTS: step.late,
        VISITORS_MEMBERS: step.members,
        VISITORS_WINDOWS: step.windows,
        VISITORS_STREAM_METRICS: visitor_metrics_row(batch_id, parsed, step, seconds),
        VISITORS_SEEN: seen_table(step.state, batch_id),
        VISITORS_STATE: state_table(step.state),
    }


def _read(lines: pa.Table, config: LabConfig) -> pa.Table:
    return lines.select(PARSED_SCHEMA.names).cast(PARSED_SCHEMA)


def _step(
    parsed: pa.Table, state: VisitorState, settings: VisitorSettings, batch_id: int, started: float
) -> StepOutput:
    step = visitors_step(parsed, state, settings, batch_id)
    logged = {
        "lines": step.input_lines,
        "new_urls": int(pc.sum(step.outcomes["new_urls"]).as_py() or 0) if step.outcomes.num_rows else 0,
        "late_pairs": step.late.num_rows,
        "duplicates": step.duplicates.num_rows,
        "dead_letters": step.dead_letters.num_rows,
        "state_entries": step.state_entries,
    }
    return StepOutput(batch_rows(batch_id, parsed, step, time.monotonic() - started), step.state, logged)


def _holds_open(state: VisitorState, settings: VisitorSettings) -> bool:
    """The state holds a window the watermark has not made final."""
    ends = micros(state.members["window_end"])
    return bool((~is_final(ends, state.clock.watermark_after(settings.clock))).any())


# The ``unique_visitors`` stream for the live runner (``lklab.live_stream``).
VISITORS_RULE = StreamRule(
    what="unique_visitors speed layer",
    app_id=APP_ID,
    layout=LAYOUT,
    settings=visitor_settings,
    table_settings=visitors_table_settings,
    state=StateKind(VisitorState.empty, state_from_table, _holds_open),
    step=_step,
    parse=parse_page_views,
    read=_read,
    logger="lklab.visitors",
)
run_visitors_speed = VISITORS_RULE.run


# The replay's micro-batches: its step rebuilds the seen set and the state each micro-batch, so a
# replay of one segment per micro-batch costs about four times one of the whole log (measured on
# 200,000 views in 372 segments); a cut of this much log keeps the walk task's lines bounded.
REPLAY_BATCH_BYTES = 64 << 20


def replay_visitors(spark: SparkSession, config: LabConfig, name: str, *, replace: bool = False) -> ReplayRun:
    """The Kappa replay of this stream into ``kappa/<name>/`` (``lklab.replay_runner``), cut into
    micro-batches of about ``REPLAY_BATCH_BYTES`` of log: its rows are a live run's, batch ids aside."""
    per_batch = segments_per_batch_of(config.lake, REPLAY_BATCH_BYTES)
    return replay_on_executors(spark, config, VISITORS_RULE, name, replace=replace, segments_per_batch=per_batch)

"""The speed layer: an always-on Structured Streaming job over the durable log.

Source: the log, one segment per micro-batch by default, offsets in Spark's checkpoint, parsed
and validated by ``parse_events`` as part of the streaming query (analysed once, not per batch).
Each micro-batch is collected once as Arrow; ``shared.speed.stream_step`` classifies it against
the state carried from the batch before (the log's clock, the remembered first copies, the
windows held), and the results are committed. What it decides depends on the log alone, not
on how the log is cut into micro-batches. Exactly once: every write is a Delta commit tagged
``(app_id, batch_id)`` and skipped when already committed, and the state table is written last,
so a micro-batch replayed after a crash reads the state from before it and commits nothing
twice; one whose state is already committed is skipped whole. That commit is every stream's
(``lklab.stream_sink``); this layer declares its tables (``LAYOUT``).

Per batch that is one Spark query and up to six Delta commits. The state stays in memory from
one batch to the next (read from ``stream_state`` when a process starts and after a batch found
already committed), and the five output commits run side by side before the state's. How it
runs is every stream's (``lklab.live_stream``); this module is the layer's ``StreamRule``.

Crash points (``lklab.crash_points``) at the start of each batch and around each commit let
the tests kill it anywhere. An always-on layer keeps the log's clock moving while no traffic
arrives (``lklab.heartbeats``): once it has read everything, holds open windows, and the log has
not grown for ``heartbeat-interval``, it appends a heartbeat line to the log, which it then
reads like any other, as a replay will.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import pyarrow as pa

from lklab.live_stream import LiveStream, OnExecutors, StateKind, StepOutput, StreamRule, checkpoint_path
from lklab.pipelines.billing_windows.replay import whole_log
from lklab.stream_sink import stream_layout
from shared import catalog
from shared.aggregation import WINDOW_KEY
from shared.catalog import DEAD_LETTER, DUPLICATE_EVENTS, LATE_EVENTS, SPEED_AGGREGATES, STREAM_METRICS, STREAM_STATE
from shared.events import parse_events
from shared.keyed_batch import KeyedBatch, keyed_batch
from shared.keyed_speed import keyed_speed, query_settings
from shared.speed import StreamSettings, stream_step
from shared.stream_metrics import BatchTotals, batch_totals, metrics_table
from shared.stream_state import StreamState, state_from_table, state_table
from shared.stream_windows import open_windows
from shared.table_settings import stream_settings

__all__ = ["SPEED_RULE", "KEYED_SPEED_RULE", "run_speed", "SPEED_TABLES"]

SPEED_TABLES = tuple(table.name for table in catalog.SPEED_TABLES)  # under the layer's prefix


def _output(rows: dict, totals: BatchTotals, state, batch_id: int, started: float) -> StepOutput:
    """What micro-batch ``batch_id`` writes: its ``rows`` (all but the metrics), and its metrics
    row and log line from its ``totals``."""
    figures = totals.figures(batch_id, time.monotonic() - started)
    logged = {
        "segments": [figures.first_segment, figures.last_segment],
        "lines": figures.input_lines,
        "on_time": figures.on_time,
        "late": figures.late,
        "duplicates": figures.duplicates,
        "dead_letters": figures.dead_letters,
        "heartbeats": figures.heartbeats,
        "watermark_lag_seconds": figures.watermark_lag_seconds,
    }
    return StepOutput({**rows, STREAM_METRICS: metrics_table([figures])}, state, logged)


def _step(parsed: pa.Table, state: StreamState, settings: StreamSettings, batch_id: int, started: float) -> StepOutput:
    step = stream_step(parsed, state, settings, batch_id)
    rows = {
        DEAD_LETTER: step.dead_letters,
        DUPLICATE_EVENTS: step.duplicates,
        LATE_EVENTS: step.late_events,
        SPEED_AGGREGATES: step.window_changes,
        STREAM_STATE: state_table(step.state),
    }
    return _output(rows, batch_totals(parsed, step), step.state, batch_id, started)


def _keyed_step(batch: KeyedBatch, state: None, settings: StreamSettings, batch_id: int, started: float) -> StepOutput:
    """The step on the executors: the tables' rows as files its tasks wrote (``KeyedBatch``); what
    is carried is how many windows are held open."""
    batch = batch.of(batch_id)
    rows = {table: batch.written[name] for name, table in _WRITTEN.items()}
    return _output(
        {**rows, SPEED_AGGREGATES: batch.window_changes}, batch.totals, batch.open_windows, batch_id, started
    )


# The tables the step on the executors writes from there (``shared.keyed_batch.WRITTEN``).
_WRITTEN = {
    "dead_letters": DEAD_LETTER,
    "duplicates": DUPLICATE_EVENTS,
    "late_events": LATE_EVENTS,
    "state": STREAM_STATE,
}


def _open_windows(rows: pa.Table) -> int:
    """Windows held open in a ``stream_state`` table (the step on the executors never reads its
    state table: its state is the query's)."""
    return open_windows(state_from_table(rows).windows)


def _holds_open(state: StreamState, settings: StreamSettings) -> bool:
    """Windows the watermark has not finalised yet are held."""
    return open_windows(state.windows) > 0


# The billing speed layer's stream: windowed sums, late events to the side output.
SPEED_RULE = StreamRule(
    what="speed layer",
    app_id="speed",
    # What a micro-batch commits (``lklab.stream_sink``): the outputs side by side, the state last.
    layout=stream_layout(catalog.SPEED_TABLES, merged={SPEED_AGGREGATES: WINDOW_KEY}),
    settings=StreamSettings.of,
    table_settings=stream_settings,
    state=StateKind(StreamState.empty, state_from_table, _holds_open),
    step=_step,
    parse=parse_events,
    whole_log=whole_log,  # a replay computes the whole log through Spark, by day and by key
)
# The same stream with its step on the executors (``shared.keyed_speed``): the same rows. What
# it carries from one micro-batch to the next is how many windows it holds open.
KEYED_SPEED_RULE = dataclasses.replace(
    SPEED_RULE,
    step=_keyed_step,
    state=StateKind(int, _open_windows, lambda open_windows, settings: open_windows > 0),
    on_executors=OnExecutors(
        operators=keyed_speed,
        query_settings=query_settings,
        batch=lambda cells, root: keyed_batch(cells, {name: root(table) for name, table in _WRITTEN.items()}),
        segments=lambda batch: batch.totals.lines_per_segment,
        checkpoint="speed-on-executors",
    ),
)
_RULES = {"driver": SPEED_RULE, "executors": KEYED_SPEED_RULE}


def _checkpoint(lake: Path, rule: StreamRule) -> Path:
    return checkpoint_path(lake, "", rule.app_id if rule.on_executors is None else rule.on_executors.checkpoint)


def require_its_own_step(config) -> None:
    """``ValueError`` (bad input, said before Spark starts) when the lake's speed layer tables
    were written by the other step than ``config.speed_step``'s (each keeps its checkpoint)."""
    from deltalake import DeltaTable

    from shared.catalog import tables_root

    lake = Path(config.lake).resolve()
    other = next(step for step in _RULES if step != config.speed_step)
    written = DeltaTable.is_deltatable(str(tables_root(lake) / catalog.STREAM_STATE.name))
    if written and not _checkpoint(lake, _RULES[config.speed_step]).exists():
        theirs = _checkpoint(lake, _RULES[other])
        if theirs.exists():
            raise ValueError(
                f"speed-step {config.speed_step}: the speed layer's tables under {lake} were written with speed-step "
                f"{other} (its checkpoint is {theirs}); go on with --speed-step {other}, or start over on a fresh lake"
            )


def run_speed(spark, config, **options) -> LiveStream:
    """The billing speed layer, its step where ``config.speed_step`` says (``LiveStream.run``)."""
    return _RULES[config.speed_step].run(spark, config, **options)

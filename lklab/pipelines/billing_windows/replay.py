"""Kappa replay: the speed layer's rules re-run over the whole log, at batch speed.

A replay named ``RUN`` writes tables of its own, ``kappa/RUN/<table>`` (the speed layer's, and
with ``history`` ``window_history``), so it never touches the speed layer's tables. Its settings
(watermark delay, allowed lateness ...) are the run's own. It runs as every pipeline's replay
does (``lklab.replay_runner``: its lock, its refusal of a taken name, its tables written with
the state last and tagged with the last micro-batch); what billing brings is ``whole_log``: not
a walk of the log in one task but a computation through Spark over the whole log, by day and by
key (``shared.replay``), of exactly the rows a live stream with the same settings writes,
whatever micro-batches that stream read. What a replay cost (wall and CPU seconds, segments,
lines) is appended to ``replay_runs``, next to the batch recompute's ``batch_runs``, so the two
can be compared.

Run as ``lklab replay --name RUN`` or ``spark-submit spark_jobs/replay_job.py --name RUN``.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession

from lklab.replay_runner import ReplayExists, ReplayRun, WholeLog, replay_on_executors
from shared.batch_chain import without_event_text
from shared.catalog import (
    DEAD_LETTER,
    DUPLICATE_EVENTS,
    LATE_EVENTS,
    REPLAY_RUNS,
    SPEED_AGGREGATES,
    STREAM_METRICS,
    STREAM_STATE,
    WINDOW_HISTORY,
)
from shared.config import LabConfig
from shared.locks import history_append
from shared.replay import replay
from shared.speed import StreamSettings
from shared.tables import Tables

__all__ = ["ReplayRun", "ReplayExists", "run_replay", "whole_log"]


def whole_log(parsed: DataFrame, config: LabConfig, *, history: bool = False) -> WholeLog:
    """The speed layer's tables over the whole log (``parsed``: the log's lines through
    ``parse_events``), with ``history`` its window history too: the speed rule's ``whole_log``."""
    parsed = parsed.transform(without_event_text).persist()
    result = replay(parsed, StreamSettings.of(config), history=history)
    rows = {
        DEAD_LETTER: result.dead_letters,
        DUPLICATE_EVENTS: result.duplicates,
        LATE_EVENTS: result.late_events,
        SPEED_AGGREGATES: result.window_rows,
        STREAM_METRICS: result.metrics,
        STREAM_STATE: result.state,
    }
    if result.history is not None:
        rows[WINDOW_HISTORY] = result.history

    def release() -> None:
        result.release()
        parsed.unpersist()

    metrics = result.metrics
    return WholeLog(rows, metrics.num_rows, sum(metrics["input_lines"].to_pylist()), release)


def run_replay(
    spark: SparkSession, config: LabConfig, name: str, *, replace: bool = False, history: bool = False
) -> ReplayRun:
    """Replay the whole log into ``kappa/<name>/`` with ``config``'s stream settings, and record
    its cost in ``replay_runs``. One process at a time per replay name: a second one (or
    ``--replace`` of a running one) is refused (``LockHeld``)."""
    from lklab.pipelines.billing_windows.speed import SPEED_RULE

    run = replay_on_executors(spark, config, SPEED_RULE, name, replace=replace, completed=_recorded, history=history)
    _record(Tables(spark, Path(config.lake).resolve(), config.table_engine), config, run)
    return run


def _recorded(tables: Tables, name: str) -> bool:
    """A replay finished once its run is recorded (one killed after writing its tables, before
    that, starts over)."""
    return tables.exists(REPLAY_RUNS.name) and name in tables.read_arrow(REPLAY_RUNS.name)["name"].to_pylist()


def _record(tables: Tables, config: LabConfig, run: ReplayRun) -> None:
    """``run``'s row in ``replay_runs`` (one per completed run, appended under its lock)."""
    settings = config.describe()
    row = {
        "name": [run.name],
        "recorded_at": pa.array([dt.datetime.now(dt.UTC)], pa.timestamp("us", tz="UTC")),
        "windows": [config.window.describe()],
        "watermark_delay": [settings["watermark-delay"]],
        "allowed_lateness": [settings["allowed-lateness"]],
        "dedup_horizon": [settings["dedup-horizon"]],
        "segments": pa.array([run.segments], pa.int64()),
        "micro_batches": pa.array([run.micro_batches], pa.int64()),
        "lines": pa.array([run.lines], pa.int64()),
        "wall_seconds": pa.array([run.wall_seconds], pa.float64()),
        "cpu_seconds": pa.array([run.cpu_seconds], pa.float64()),
        "cost_scope": [run.cost_scope],
    }
    with history_append(tables.root.parent, REPLAY_RUNS.name):
        existing = tables.read_arrow(REPLAY_RUNS.name).num_rows if tables.exists(REPLAY_RUNS.name) else 0
        tables.append(
            REPLAY_RUNS.name, pa.table(row, schema=REPLAY_RUNS.schema), app_id="replay-runs", version=existing + 1
        )

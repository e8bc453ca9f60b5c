"""Kappa replay: the stream's rules re-run over the whole log, at batch speed.

A replay named ``RUN`` writes tables of its own, ``kappa/RUN/<table>`` (``speed_aggregates``,
``late_events``, ``duplicate_events``, ``dead_letter``, ``stream_metrics``, ``stream_state``,
and with ``history`` ``window_history``), so it never touches the speed layer's tables. Its
settings (watermark delay, allowed lateness ...) are the run's own. It does not stream: it
computes, through Spark over the whole log (``shared.replay``), exactly the rows a live stream
with the same settings writes, whatever micro-batches that stream read. What it cost (wall and
CPU seconds, segments, lines) is appended to ``replay_runs``, next to the batch recompute's
``batch_runs``, so the two can be compared.

Run as ``lklab replay --name RUN`` or ``spark-submit spark_jobs/replay_job.py --name RUN``.
"""

from __future__ import annotations

import datetime as dt
import shutil
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
from pyspark.sql import SparkSession

from lklab.progress import progress as track
from lklab.replay_runner import ReplayExists
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
    replay_prefix,
)
from shared.compute_cost import measure_cost
from shared.config import LabConfig
from shared.eventlog import EventLog
from shared.locks import history_append, writer
from shared.log_source import parsed_log
from shared.replay import replay
from shared.speed import StreamSettings
from shared.table_settings import record, stream_settings
from shared.tables import Tables

__all__ = ["ReplayRun", "ReplayExists", "run_replay", "writer_role"]


@dataclass(frozen=True)
class ReplayRun:
    """``segments``: how many the replay read; ``micro_batches``: the ``stream_metrics`` rows it
    wrote (one per segment with lines, as a live run reading one segment per micro-batch)."""

    name: str
    segments: int
    micro_batches: int
    lines: int
    wall_seconds: float
    cpu_seconds: float
    cost_scope: str


def writer_role(name: str) -> str:
    """The lock a replay named ``name`` holds while it runs (``shared.locks``)."""
    return f"replay-{name}"


def run_replay(
    spark: SparkSession, config: LabConfig, name: str, *, replace: bool = False, history: bool = False
) -> ReplayRun:
    """Replay the whole log into ``kappa/<name>/`` with ``config``'s stream settings.

    One process at a time per replay name: a second one (or ``--replace`` of a running one) is
    refused (``LockHeld``)."""
    lake = Path(config.lake).resolve()
    prefix = replay_prefix(name)
    with writer(lake, writer_role(name)):
        return _run_replay(spark, config, lake, name, prefix, replace, history)


def _run_replay(spark, config, lake: Path, name: str, prefix: str, replace: bool, history: bool) -> ReplayRun:
    tables = Tables(spark, lake, config.table_engine)
    owned = [tables.root / prefix, lake / "checkpoints" / prefix]
    completed = tables.exists(REPLAY_RUNS.name) and name in tables.read_arrow(REPLAY_RUNS.name)["name"].to_pylist()
    if any(path.exists() for path in owned):
        # a replay that never recorded its run was interrupted: it starts over without asking
        if completed and not replace:
            raise ReplayExists(
                f"replay {name!r} already exists under {owned[0]}; pick another --name or pass --replace"
            )
        for path in owned:
            shutil.rmtree(path, ignore_errors=True)
    segments = EventLog(lake).last_segment()
    with measure_cost(config.spark_master) as cost:
        parsed = (
            parsed_log(
                spark, str(lake), segments, max_clock_skew=config.max_clock_skew, max_line_bytes=config.max_line_bytes
            )
            .transform(without_event_text)
            .persist()
        )
        result = replay(parsed, StreamSettings.of(config), history=history)
        outputs = {
            DEAD_LETTER: result.dead_letters,
            DUPLICATE_EVENTS: result.duplicates,
            LATE_EVENTS: result.late_events,
            SPEED_AGGREGATES: result.window_rows,
            STREAM_METRICS: result.metrics,
            STREAM_STATE: result.state,
        }
        if result.history is not None:
            outputs[WINDOW_HISTORY] = result.history
        with track(f"replay {name}: tables written", total=len(outputs)) as writing:
            for table, rows in outputs.items():
                tables.overwrite(table.at(prefix), rows)
                writing.advance()
        record(tables, [table.at(prefix) for table in outputs], stream_settings(config))
        result.release()
        parsed.unpersist()
    metrics = result.metrics
    run = ReplayRun(
        name=name,
        segments=segments,
        micro_batches=metrics.num_rows,
        lines=sum(metrics["input_lines"].to_pylist()),
        wall_seconds=cost.wall_seconds,
        cpu_seconds=cost.cpu_seconds,
        cost_scope=cost.scope,
    )
    settings = config.describe()
    row = {
        "name": [name],
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
    with history_append(lake, REPLAY_RUNS.name):
        existing = tables.read_arrow(REPLAY_RUNS.name).num_rows if tables.exists(REPLAY_RUNS.name) else 0
        tables.append(
            REPLAY_RUNS.name, pa.table(row, schema=REPLAY_RUNS.schema), app_id="replay-runs", version=existing + 1
        )
    return run

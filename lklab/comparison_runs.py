"""What the three comparisons do alike around their pipeline's own runs.

``lklab.experiment`` (billing), ``lklab.pipelines.unique_visitors.comparison`` and ``lklab.pipelines.order_payments.comparison``
each run a batch truth, then per stream setting ``(W, L)`` a live stream, a replay and a
reconciliation, and measure every configuration. What differs is which jobs run and what their
tables mean; what is the same is here:

* ``log_to_compare``: the lake, its tables and the log's last segment (an empty log is refused
  with ``hint``, what to run first);
* ``setting_config``: the lab's settings at one stream setting (durations as written);
* ``live_run``: a live stream under ``kappa/<name>/`` from nothing (tables and checkpoint left
  by an earlier comparison of that name removed), ``available_now``, with its cost;
* ``timed``: any other path's run with its cost (``shared.compute_cost``);
* ``each_setting``: one measured stream per setting, progress labelled ``W=.. L=..``;
* ``measuring``: the measurement of every configuration between its two progress lines;
* ``cost_scope``: which processes the costs count.
"""

from __future__ import annotations

import dataclasses
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from pyspark.sql import SparkSession

from lklab.progress import progress as track
from lklab.report.model import PathCost
from shared.catalog import replay_prefix
from shared.compute_cost import measure_cost
from shared.config import LabConfig
from shared.durations import parse_duration
from shared.eventlog import EventLog
from shared.tables import Tables

__all__ = ["cost_scope", "each_setting", "live_run", "log_to_compare", "measuring", "setting_config", "timed"]

Progress = Callable[[str], None]
T = TypeVar("T")
Setting = tuple[str, str]  # (watermark delay, allowed lateness) as written


def log_to_compare(spark: SparkSession, config: LabConfig, hint: str) -> tuple[str, Tables, int]:
    """(the lake's resolved path, its tables, the log's last segment); ``ValueError`` naming
    ``hint`` when the log is empty."""
    lake = str(Path(config.lake).resolve())
    last = EventLog(lake).last_segment()
    if last == 0:
        raise ValueError(f"the log under {lake} is empty: {hint}")
    return lake, Tables(spark, lake, config.table_engine), last


def setting_config(config: LabConfig, delay: str, lateness: str) -> LabConfig:
    """``config`` with the watermark delay and allowed lateness of one stream setting."""
    return dataclasses.replace(
        config,
        watermark_delay=parse_duration(delay, name="watermark-delay"),
        allowed_lateness=parse_duration(lateness, name="allowed-lateness"),
    )


def timed(config: LabConfig, path: str, run: Callable[[], T]) -> tuple[T, PathCost]:
    """``run()``'s result and its compute as ``path`` (``PathCost``'s paths)."""
    with measure_cost(config.spark_master) as cost:
        result = run()
    return result, PathCost(path, cost.cpu_seconds, cost.wall_seconds)


def live_run(
    spark: SparkSession,
    config: LabConfig,
    tables: Tables,
    name: str,
    segments_per_batch: int,
    run_stream: Callable[..., object],
) -> tuple[str, PathCost]:
    """Run ``run_stream`` (``run_speed``, ``run_visitors_speed``, ``run_payments_speed``) to the
    log's end into ``kappa/<name>/`` from nothing; returns that prefix and the run's cost."""
    live = replay_prefix(name)
    for path in (tables.root / live, Path(config.lake).resolve() / "checkpoints" / live):
        shutil.rmtree(path, ignore_errors=True)
    _, cost = timed(
        config,
        "speed",
        lambda: run_stream(spark, config, available_now=True, segments_per_batch=segments_per_batch, prefix=live),
    )
    return live, cost


def each_setting(
    settings: dict[tuple[int, int], Setting], progress: Progress, measure: Callable[[str, str, Progress], T]
) -> dict[tuple[int, int], T]:
    """``measure(delay, lateness, step)`` for each setting, in order; ``step`` reports progress
    under the setting's label."""
    measured = {}
    with track("stream settings", total=len(settings)) as settings_run:
        for key, (delay, lateness) in settings.items():
            step = lambda what, label=f"W={delay} L={lateness}": progress(settings_run.step(f"{label}: {what}"))  # noqa: E731
            measured[key] = measure(delay, lateness, step)
            settings_run.advance()
    return measured


def measuring(progress: Progress, configurations: list, started: float, assess: Callable[[], T]) -> T:
    """``assess()``, announced, and then timed from ``started`` (``time.monotonic``)."""
    progress(f"measuring {len(configurations)} configurations on the processing-time clock")
    assessed = assess()
    progress(f"measured {len(configurations)} configurations in {time.monotonic() - started:.0f}s")
    return assessed


def cost_scope(config: LabConfig) -> str:
    """The processes a measured cost counts: executors run inside the driver's machine only locally."""
    return "driver and local executors" if config.spark_master.startswith("local") else "driver only"

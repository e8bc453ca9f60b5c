"""What the three comparisons do alike around their pipeline's own runs.

``lklab.pipelines.billing_windows.comparison`` (billing), ``lklab.pipelines.unique_visitors.comparison`` and ``lklab.pipelines.order_payments.comparison``
each run a batch truth, then per stream setting ``(W, L)`` a live stream, a replay and a
reconciliation, and measure every configuration. What differs is which jobs run and what their
tables mean; what is the same is here:

* ``Comparing``: the comparison under way (session, settings, plan, the lake's tables, the log's
  last segment, when it started), what each stream setting's measurement takes;
  ``Comparing.start`` refuses an empty log with ``hint``, what to run first, and
  ``Comparing.measured`` is the measurement of every configuration between its two progress
  lines;
* ``setting_config``: the lab's settings at one stream setting (durations as written);
* ``live_run``: a live stream under ``kappa/<name>/`` from nothing (tables and checkpoint left
  by an earlier comparison of that name removed), ``available_now``, with its cost, split into a
  fixed part and a part per line over its micro-batches (``lklab.report.scaling``);
* ``timed``: any other path's run with its cost (``shared.compute_cost``);
* ``batch_path``: Lambda's batch over the whole log with the batch path's cost, split into a
  fixed part and a part per line by a line over the batch's runs at two sizes or more
  (``lklab.report.scaling.fit_runs``; a run over the first half of the log first when the
  comparison's own runs read one size only);
* ``warm_live``: the pipeline's live stream over the log's first segment in a scratch lake,
  before the first measured one, so that no stream setting pays the session's warm-up;
* ``run_setting``: one stream setting's live stream, replay and reconciliation, the replay's
  cost split over its own micro-batches where its rule times them (``StreamRuns.metrics``);
* ``each_setting``: ``warm_live``, then one measured stream per setting, progress labelled
  ``W=.. L=..``;
* ``cost_scope``: which processes the costs count.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar

import pyarrow as pa
from pyspark.sql import SparkSession

from lklab.progress import progress as track
from lklab.report.commit_time import commit_time
from lklab.report.model import Configuration, PathCost
from lklab.report.scaling import fit_micro_batches, fit_runs
from shared import catalog
from shared.catalog import replay_prefix
from shared.compute_cost import measure_cost
from shared.config import LabConfig
from shared.durations import parse_duration
from shared.eventlog import EventLog, written_log
from shared.tables import Tables

__all__ = [
    "ComparisonPlan",
    "Comparing",
    "SettingRun",
    "StreamRuns",
    "batch_path",
    "warm_up",
    "cost_scope",
    "each_setting",
    "live_run",
    "run_setting",
    "setting_config",
    "timed",
]

Progress = Callable[[str], None]
T = TypeVar("T")
Setting = tuple[str, str]  # (watermark delay, allowed lateness) as written


@dataclass(frozen=True)
class ComparisonPlan:
    """What to sweep. Durations as the user wrote them (``"10s"``, ``"0"``).

    ``segments_per_batch``: segments per micro-batch of the live runs (the rows do not depend on
    it; their cost does). ``error_step``: the error series' sampling step. ``processing_time``:
    add the processing-time baseline.
    """

    name: str
    watermark_delays: tuple[str, ...] = ("10s", "1m")
    allowed_lateness: tuple[str, ...] = ("0", "10m")
    segments_per_batch: int = 10
    error_step: str = "10s"
    processing_time: bool = True

    def __post_init__(self) -> None:
        for value in (*self.watermark_delays, *self.allowed_lateness):
            parse_duration(value, name="duration")
        if not self.watermark_delays or not self.allowed_lateness:
            raise ValueError("give at least one watermark delay and one allowed lateness")
        if self.segments_per_batch < 1:
            raise ValueError(f"segments-per-batch must be at least 1, got {self.segments_per_batch}")
        if parse_duration(self.error_step, name="error-step") <= 0:
            raise ValueError(f"error-step must be longer than zero, e.g. 10s (got {self.error_step})")

    def configurations(self) -> list[Configuration]:
        lambdas = [Configuration("lambda", w, "0") for w in self.watermark_delays]
        kappas = [
            Configuration("kappa", w, lateness) for w in self.watermark_delays for lateness in self.allowed_lateness
        ]
        return lambdas + kappas + ([Configuration("processing-time")] if self.processing_time else [])


@dataclass(frozen=True)
class Comparing:
    """A comparison under way: the Spark session it runs in, the lab's settings (before any stream
    setting), the plan it runs, the lake (its resolved path) and its tables, the log's last
    segment, and when it started (``time.monotonic()``)."""

    spark: SparkSession
    config: LabConfig
    plan: ComparisonPlan
    lake: str
    tables: Tables
    last: int
    started: float

    @classmethod
    def start(cls, spark: SparkSession, config: LabConfig, plan: ComparisonPlan, hint: str) -> Comparing:
        """The comparison of ``plan`` over ``config.lake``'s log, started now; ``ValueError``
        naming ``hint`` (what to run first) when the log is empty."""
        lake, last = written_log(config.lake, hint)
        return cls(spark, config, plan, lake, Tables(spark, lake, config.table_engine), last, time.monotonic())

    def measured(self, progress: Progress, assess: Callable[[], T]) -> T:
        """``assess()``, announced, and then timed from the start."""
        configurations = len(self.plan.configurations())
        progress(f"measuring {configurations} configurations on the processing-time clock")
        assessed = assess()
        progress(f"measured {configurations} configurations in {time.monotonic() - self.started:.0f}s")
        return assessed


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
    stream, cost = timed(
        config,
        "speed",
        lambda: run_stream(spark, config, available_now=True, segments_per_batch=segments_per_batch, prefix=live),
    )
    rows = _metrics_rows(stream)
    return live, dataclasses.replace(
        cost,
        scaling=fit_micro_batches(cost.cpu_seconds, _timed_batches(rows)),
        commit_time=commit_time(_commit_times(rows)),
    )


def _metrics_rows(stream: object) -> pa.Table | None:
    """The metrics table of a live stream's run, None when it has none."""
    rule, tables = getattr(stream, "rule", None), getattr(stream, "tables", None)
    metrics = getattr(rule, "metrics", None)
    if metrics is None or tables is None or not tables.exists(stream.table(metrics)):
        return None
    return tables.read_arrow(stream.table(metrics))


def _commit_times(rows: pa.Table | None) -> list[tuple[int, object, object]]:
    """``(input lines, started_at, committed_at)`` of each micro-batch in metrics ``rows``."""
    if rows is None or not {"input_lines", "started_at", "committed_at"} <= set(rows.column_names):
        return []
    return list(zip(*(rows[name].to_pylist() for name in ("input_lines", "started_at", "committed_at"))))


def _timed_batches(rows: pa.Table | None) -> list[tuple[int, float]]:
    """``(input lines, step seconds)`` of each micro-batch in metrics ``rows``; none when there
    are none or they time no step."""
    if rows is None or not {"input_lines", "duration_seconds"} <= set(rows.column_names):
        return []
    return list(zip(rows["input_lines"].to_pylist(), rows["duration_seconds"].to_pylist()))


class MeasuredBatch(Protocol):
    """What a batch run says of itself: the last segment and the lines it read, what it cost."""

    last_segment: int
    lines: int
    wall_seconds: float
    cpu_seconds: float


R = TypeVar("R", bound=MeasuredBatch)


def batch_path(
    config: LabConfig,
    last: int,
    run: Callable[[LabConfig, int | None], R],
    progress: Progress,
    earlier: Sequence[R] = (),
) -> tuple[R, PathCost]:
    """Lambda's batch over the whole log of ``last`` segments (``run(config, None)``) and the
    batch path's cost: the ``earlier`` recomputes' (Lambda's own, inside the log) and this run's,
    each as the run measured itself, with their CPU split by a line over every run's lines
    (``fit_runs``).

    When no earlier run read fewer segments than the whole log, the runs would give one size:
    ``run(scratch, last // 2)`` over the first half of the segments goes first, a measurement in
    the fit only, never in the path's cost (Lambda would not run it), in a scratch lake that
    shares this lake's log (``measurement_lake``), so that this lake's tables stay as the whole
    log's batch writes them. ``warm_up`` goes before it (and before any ``earlier`` run, the
    caller's part), so that no run of the fit pays the session's warm-up. A log of one segment
    has no such half: its batch stays unsplit."""
    points = [(r.lines, r.cpu_seconds) for r in earlier]
    half = last // 2
    if half >= 1 and not any(r.last_segment < last for r in earlier):
        warm_up(config, run, progress)
        progress(f"batch over segments 1..{half}: a second size to split the batch's cost (a measurement only)")
        with measurement_lake(config) as scratch:
            measured = run(scratch, half)
        points.append((measured.lines, measured.cpu_seconds))
    progress("batch recompute: the truth from the complete log")
    whole = run(config, None)
    points.append((whole.lines, whole.cpu_seconds))
    lambdas = [*earlier, whole]
    return whole, PathCost(
        "batch",
        sum(r.cpu_seconds for r in lambdas),
        sum(r.wall_seconds for r in lambdas),
        scaling=fit_runs(points),
    )


def warm_up(config: LabConfig, run: Callable[[LabConfig, int | None], object], progress: Progress) -> None:
    """``run`` over the log's first segment in a scratch lake, measured by nothing: the session's
    first batch plans, compiles and loads what every later one reuses, a cost no size of the
    batch would otherwise share alike."""
    progress("batch over segment 1: the session warmed up (measured by nothing)")
    with measurement_lake(config) as scratch:
        run(scratch, 1)


def warm_live(on: Comparing, run_stream: Callable[..., object], progress: Progress) -> None:
    """``run_stream`` over the log's first segment in a scratch lake, measured by nothing: a
    process's first live stream starts what every later one reuses (the query's first plan, the
    first collect and commits), a cost that would otherwise fall on the first stream setting
    measured alone: its CPU, and its first micro-batch's time to commit."""
    progress("live stream over segment 1: the session warmed up (measured by nothing)")
    with first_segment_lake(on.config) as scratch:
        run_stream(on.spark, scratch, available_now=True, segments_per_batch=1, prefix=replay_prefix("warm-up"))


@contextmanager
def first_segment_lake(config: LabConfig) -> Iterator[LabConfig]:
    """``config`` on a scratch lake beside ``config.lake`` whose log is this lake's first
    segment (a hard link, or a copy across file systems), removed afterwards with its tables."""
    lake = Path(config.lake).resolve()
    scratch = Path(tempfile.mkdtemp(prefix=".warm-up-", dir=lake))
    try:
        first = EventLog(lake).segment_path(1)
        (scratch / "log").mkdir()
        try:
            os.link(first, scratch / "log" / first.name)
        except OSError:
            shutil.copy2(first, scratch / "log" / first.name)
        yield dataclasses.replace(config, lake=str(scratch))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


@contextmanager
def measurement_lake(config: LabConfig) -> Iterator[LabConfig]:
    """``config`` on a scratch lake beside ``config.lake`` whose log is this lake's (a link, read
    only: the measuring runs append nothing), removed afterwards with every table it got."""
    lake = Path(config.lake).resolve()
    scratch = Path(tempfile.mkdtemp(prefix=".measurement-", dir=lake))
    try:
        (scratch / "log").symlink_to(lake / "log", target_is_directory=True)
        yield dataclasses.replace(config, lake=str(scratch))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


@dataclass(frozen=True)
class StreamRuns:
    """How one pipeline's comparison runs a stream setting: ``live(spark, config, **options)``
    (its live stream), ``replay(spark, config, name)`` (a Kappa replay into ``kappa/<name>/``),
    ``rows(tables, prefix)`` (a set of rows per table, batch ids left out, to check the two
    agree) and ``reconcile(spark, config, against, name)`` (the live stream against the truth);
    ``metrics``: the stream's metrics table, whose micro-batches in the replay split its cost
    (``fit_micro_batches``) where they are timed at two sizes or more."""

    live: Callable[..., object]
    replay: Callable[[SparkSession, LabConfig, str], object]
    rows: Callable[[Tables, str], dict[str, set]]
    reconcile: Callable[[SparkSession, LabConfig, str, str], Any]
    metrics: catalog.Table | None = None


@dataclass(frozen=True)
class SettingRun:
    """One stream setting's runs: the live stream's tables (``live``, a prefix) and cost, the
    replay's cost, and the reconciliation of the live stream with its cost."""

    config: LabConfig
    live: str
    live_cost: PathCost
    replay_cost: PathCost
    reconciled: Any
    reconciliation_cost: PathCost


def run_setting(on: Comparing, setting: Setting, step: Progress, runs: StreamRuns) -> SettingRun:
    """``setting``'s live stream to the log's end (under ``kappa/<plan>-w<W>-l<L>/``), its Kappa
    replay, the check that both wrote the same rows, and the live stream reconciled.
    ``RuntimeError`` naming the table when the live run and the replay disagree."""
    spark, config, tables, plan = on.spark, on.config, on.tables, on.plan
    delay, lateness = setting
    name = f"{plan.name}-w{delay}-l{lateness}"
    run_config = setting_config(config, delay, lateness)
    step("live stream")
    live, live_cost = live_run(spark, run_config, tables, name, plan.segments_per_batch, runs.live)
    step("full replay")
    _, replay_cost = timed(config, "replay", lambda: runs.replay(spark, run_config, f"{name}-replay"))
    replayed = replay_prefix(f"{name}-replay")
    if runs.metrics is not None:
        metrics = runs.metrics.at(replayed)
        batches = _timed_batches(tables.read_arrow(metrics) if tables.exists(metrics) else None)
        replay_cost = dataclasses.replace(replay_cost, scaling=fit_micro_batches(replay_cost.cpu_seconds, batches))
    ours, theirs = runs.rows(tables, live), runs.rows(tables, replayed)
    for table in ours:
        if ours[table] != theirs[table]:
            raise RuntimeError(
                f"stream W={delay} L={lateness}: the live run and the replay disagree on {table}; "
                f"compare {live}{table} with {replayed}{table}"
            )
    step("reconcile the live stream against the truth")
    reconciled, recon_cost = timed(
        config, "reconciliation", lambda: runs.reconcile(spark, run_config, f"kappa:{name}", name)
    )
    return SettingRun(run_config, live, live_cost, replay_cost, reconciled, recon_cost)


def each_setting(
    on: Comparing,
    run_stream: Callable[..., object],
    settings: dict[tuple[int, int], Setting],
    progress: Progress,
    measure: Callable[[str, str, Progress], T],
) -> dict[tuple[int, int], T]:
    """``measure(delay, lateness, step)`` for each setting, in order, after ``warm_live`` with
    the pipeline's live stream ``run_stream``; ``step`` reports progress under the setting's
    label."""
    warm_live(on, run_stream, progress)
    measured = {}
    with track("stream settings", total=len(settings)) as settings_run:
        for key, (delay, lateness) in settings.items():
            step = lambda what, label=f"W={delay} L={lateness}": progress(settings_run.step(f"{label}: {what}"))  # noqa: E731
            measured[key] = measure(delay, lateness, step)
            settings_run.advance()
    return measured


def cost_scope(config: LabConfig) -> str:
    """The processes a measured cost counts: executors run inside the driver's machine only locally."""
    return "driver and local executors" if config.spark_master.startswith("local") else "driver only"

"""``lklab compare``: Lambda, Kappa and processing-time windows over one log, on the log's clock.

**Runs.** Every stream setting the sweep needs — ``(W, 0)`` for Lambda's speed layer at each
watermark delay ``W``, ``(W, L)`` for each Kappa configuration — runs twice over the log:

* live: ``run_speed``, a Structured Streaming query reading ``segments_per_batch`` segments per
  micro-batch into ``kappa/<plan>-w<W>-l<L>/``. Its wall and CPU seconds are the speed layer's
  (Lambda) or the streaming job's (Kappa) cost. It is reconciled against batch truth
  (``lklab reconcile``): the unexplained figures, and Lambda's reconciliation cost;
* a full replay with its window history (``run_replay(..., history=True)``) into
  ``kappa/<plan>-w<W>-l<L>-replay/``: Kappa's replay cost, and its ``window_history`` is what
  the stream served, line by line.

The stream's rows depend on the log alone, so both must write the same rows to every output
table (``lklab.pipelines.billing_windows.agreement``: windows and their status, late events, duplicates, dead
letters, the end state, and the metrics' totals; batch ids and durations aside): checked before
anything is measured (a run that disagrees stops the comparison, naming the tables).

**Lambda's nightly batch.** At each UTC midnight ``M`` of processing time after the log's first
line, Lambda recomputes every day before ``M`` from the segments complete by then (every line of
which was processed before ``M``; none complete: no run) and the recompute lands at ``M``: from
then on Lambda serves its rows for every window starting before ``M``. The last recompute is at
the first midnight after both the log's last line and every window's start; it reads the whole
log and is the batch truth every configuration is measured against. All Lambda figures use this
one rule (``lklab.pipelines.billing_windows.measure.with_nightly_batches``). The batch's cost is
split into a fixed part and a part per line over these runs' sizes; a log without a recompute
inside it runs the batch once more first, over its first half, to measure a second size (not
counted in Lambda's cost: ``lklab.comparison_runs.batch_path``); a run over the first segment,
measured by nothing, warms the session before any measured run (``comparison_runs.warm_up``).

**Processing-time windows** (the naive baseline): the batch's first copies of every event, each
counted at once in the window its processing time falls in (``shared.clock`` gives every line's
processing time). It runs no job, so it has no cost, side output or reconciliation.

**The end.** Every figure "at the end" is at the same processing time for every configuration:
the later of the last recompute's landing and the end of every window served or in truth.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal

import numpy as np
import pyarrow as pa
from pyspark.sql import SparkSession

from lklab.comparison_runs import (
    Comparing,
    ComparisonPlan,
    batch_path,
    cost_scope,
    each_setting,
    live_run,
    setting_config,
    timed,
    warm_up,
)
from lklab.pipelines.billing_windows import measure
from lklab.pipelines.billing_windows.agreement import require_same_rows
from lklab.pipelines.billing_windows.assessment import MeasuredStream, assess, midnights
from lklab.pipelines.billing_windows.batch import run_batch
from lklab.pipelines.billing_windows.reconcile import reconcile
from lklab.pipelines.billing_windows.replay import run_replay
from lklab.pipelines.billing_windows.speed import run_speed
from lklab.report import (
    ArrivalDelay,
    FinanceAudit,
    PathCost,
    ReconciliationSummary,
    Report,
    StreamRun,
)
from shared.batch_runs import BatchRun
from shared.catalog import (
    BATCH_DUPLICATES,
    BATCH_TRUTH,
    LATE_EVENTS,
    SPEED_AGGREGATES,
    STREAM_METRICS,
    WINDOW_HISTORY,
    replay_prefix,
)
from shared.clock import ClockState, known, line_keys, split_line_keys
from shared.config import LabConfig
from shared.durations import parse_duration
from shared.events import EVENT_COLUMNS
from shared.log_source import parsed_log
from shared.partitions import DayRange
from shared.speed import StreamSettings, clocked_lines
from shared.tables import Tables

__all__ = ["ComparisonPlan", "run_comparison"]

Progress = Callable[[str], None]


@dataclass(frozen=True)
class _Log:
    """Every valid event copy in log order with ``_p`` (processing time) and ``_line`` (line
    key), and per segment the processing time of its last line (ascending in both)."""

    events: pa.Table
    segments: np.ndarray
    segment_ends: np.ndarray
    first: int
    last: int


def _clocked_log(spark: SparkSession, config: LabConfig, lake: str, last: int, settings: StreamSettings) -> _Log:
    parsed = parsed_log(
        spark, lake, last, max_clock_skew=config.max_clock_skew, max_line_bytes=config.max_line_bytes
    ).select("segment", "line_number", *EVENT_COLUMNS[2:], "reject_reason", "heartbeat")
    lines = parsed.toArrow().sort_by([("segment", "ascending"), ("line_number", "ascending")])
    clocked = clocked_lines(lines, ClockState(), settings.clock, np.zeros(lines.num_rows, dtype=np.int64))
    segments = split_line_keys(clocked.keys)[0]
    last_lines = np.flatnonzero(np.concatenate([segments[1:] != segments[:-1], [True]]))
    processing = clocked.clock.processing_time
    stamped = processing[known(processing)]  # lines before the first ingest time have none
    if not len(stamped):
        raise ValueError(f"no line of the log under {lake} has an ingest time: it has no processing-time clock")
    return _Log(clocked.events, segments[last_lines], processing[last_lines], int(stamped[0]), int(stamped[-1]))


def _nightly_batches(spark: SparkSession, config: LabConfig, tables: Tables, log: _Log, last: int, progress: Progress):
    """Lambda's recomputes at the midnights inside the log, then the one over the whole log.

    Returns the landings ``(midnight, rows)`` of the runs inside the log, the events of the whole
    log (the first run reads from segment 1, each later one the segments after the one before:
    their events add up), and the cost of all of them, split over the runs' sizes (``comparison_runs.batch_path``:
    with no recompute inside the log, a run over its first half measures the second size)."""
    first_event = int(log.events["event_time"].cast(pa.int64()).to_numpy().min()) if log.events.num_rows else log.first
    first_day = measure.to_utc(first_event - getattr(config.window, "size", 0)).date()

    landings, runs = [], []

    def recompute(on: LabConfig, last_segment: int | None) -> BatchRun:
        # Lambda's first recompute reads the log from segment 1, whatever batch_events held
        # before the comparison; each later one reads the segments after it, as a night does
        first = on is not config or not runs
        if last_segment is None:
            return run_batch(spark, on, refresh=True, whole_log=first)
        return run_batch(spark, on, last_segment=last_segment, whole_log=first)

    inside = [(m, log.segments[log.segment_ends < m]) for m in midnights(log.first, log.last)]
    inside = [(m, complete) for m, complete in inside if len(complete)]
    if inside:
        warm_up(config, recompute, progress)
    for midnight, complete in inside:
        day = measure.to_utc(midnight).date()
        days = DayRange(min(first_day, day - dt.timedelta(days=1)), day - dt.timedelta(days=1))
        progress(
            f"nightly batch recompute at {measure.to_utc(midnight):%Y-%m-%d %H:%M}Z: days to {days.last}, "
            f"segments 1..{int(complete[-1])}"
        )
        runs.append(run_batch(spark, config, days, last_segment=int(complete[-1]), whole_log=not runs))
        rows = measure.rows_of(days.select(tables.read_arrow(BATCH_TRUTH.name)))
        landings.append((midnight, {k: v for k, v in rows.items() if k[0] < midnight}))

    final, cost = batch_path(config, last, recompute, progress, runs)
    return landings, sum(r.events for r in [*runs, final]), cost


def _rows_in(tables: Tables, name: str) -> int:
    return tables.read_arrow(name).num_rows if tables.exists(name) else 0


def _stream(on: Comparing, delay: str, lateness: str, step: Callable[[str], None]) -> MeasuredStream:
    spark, tables, plan = on.spark, on.tables, on.plan
    run_config = setting_config(on.config, delay, lateness)
    name = f"{plan.name}-w{delay}-l{lateness}"
    replayed = replay_prefix(f"{name}-replay")
    step(f"live stream, {plan.segments_per_batch} segments per micro-batch")
    live, live_cost = live_run(spark, run_config, tables, name, plan.segments_per_batch, run_speed)
    step("full replay with its window history")
    replay = run_replay(spark, run_config, f"{name}-replay", replace=True, history=True)
    require_same_rows(tables, live, replayed, f"stream W={delay} L={lateness}")
    step("reconcile the live stream against batch truth")
    recon, recon_cost = timed(
        on.config, "reconciliation", lambda: reconcile(spark, run_config, against=f"kappa:{name}")
    )
    history = tables.read_arrow(WINDOW_HISTORY.at(replayed))
    late = tables.read_arrow(LATE_EVENTS.at(live)) if tables.exists(LATE_EVENTS.at(live)) else None
    return MeasuredStream(
        run=StreamRun(
            delay,
            lateness,
            plan.segments_per_batch,
            tables.read_arrow(STREAM_METRICS.at(live)).num_rows,
            _rows_in(tables, SPEED_AGGREGATES.at(live)),
        ),
        live=live_cost,
        replay=PathCost("replay", replay.cpu_seconds, replay.wall_seconds),
        reconciliation=recon_cost,
        unexplained=ReconciliationSummary(
            against=f"kappa:{name}",
            unexplained_windows=sum(c.unexplained_windows for c in recon.currencies),
            unexplained_money={c.currency: c.unexplained_money for c in recon.currencies},
        ),
        served=measure.served_from_history(history),
        history=history,
        late_events=late,
        state_rows_max=max(tables.read_arrow(STREAM_METRICS.at(replayed)).column("state_rows").to_pylist() or [0]),
    )


def _first_copies(tables: Tables, log: _Log, last: int) -> pa.Table:
    """The batch's first copies (every valid copy but ``batch_duplicates``) with their
    processing time and line key."""
    duplicates = tables.read_arrow(BATCH_DUPLICATES.name) if tables.exists(BATCH_DUPLICATES.name) else None
    events = log.events
    if duplicates is not None and duplicates.num_rows:
        copies = line_keys(duplicates["segment"].to_numpy(), duplicates["line_number"].to_numpy())
        events = events.filter(
            pa.array(~np.isin(events["_line"].to_numpy(), copies[duplicates["segment"].to_numpy() <= last]))
        )
    return events.rename_columns({"_p": "processing_time", "_line": "line"})


def _arrival(firsts: pa.Table) -> ArrivalDelay:
    delays = firsts["ingest_time"].cast(pa.int64()).to_numpy() - firsts["event_time"].cast(pa.int64()).to_numpy()
    return ArrivalDelay.of_delays(Decimal(int(d)).scaleb(-6) for d in delays)


def run_comparison(
    spark: SparkSession, config: LabConfig, plan: ComparisonPlan, *, source: str, progress: Progress = lambda _: None
) -> Report:
    """Run every configuration of ``plan`` over ``config.lake``'s log and measure them."""
    on = Comparing.start(spark, config, plan, "generate or ingest one first")
    configurations, tables, last = plan.configurations(), on.tables, on.last

    log = _clocked_log(spark, config, on.lake, last, StreamSettings.of(config))
    landings, events, batch_cost = _nightly_batches(spark, config, tables, log, last, progress)
    truth = measure.rows_of(tables.read_arrow(BATCH_TRUTH.name))
    firsts = _first_copies(tables, log, last)

    settings: dict[tuple[int, int], tuple[str, str]] = {}
    for c in configurations:
        if not c.is_baseline:
            settings.setdefault(
                (parse_duration(c.watermark_delay), parse_duration(c.allowed_lateness)),
                (c.watermark_delay, c.allowed_lateness),
            )
    streams = each_setting(
        on, run_speed, settings, progress, lambda delay, lateness, step: _stream(on, delay, lateness, step)
    )

    assessed = on.measured(
        progress,
        lambda: assess(
            configurations,
            window=config.window,
            truth=truth,
            streams=streams,
            landings=landings,
            batch_cost=batch_cost,
            firsts=firsts,
            log_last=log.last,
            error_step=plan.error_step,
        ),
    )
    return Report(
        run_id=plan.name,
        source=source,
        window=config.window.describe(),
        generated_at=dt.datetime.now(dt.UTC).replace(microsecond=0),
        events=events,
        arrival_delay=_arrival(firsts),
        results=assessed.results,
        heat_maps=assessed.heat_maps,
        audit=FinanceAudit(assessed.audit),
        streams=tuple(s.run for s in streams.values()),
        log_end=measure.to_utc(log.last),
        nightly_landings=tuple(measure.to_utc(m) for m, _ in assessed.landings),
        error_step=plan.error_step,
        cost_scope=cost_scope(config),
    )

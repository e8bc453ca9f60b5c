"""``lklab compare``: Lambda and Kappa over the same log, measured from the tables they write.

For every watermark delay ``W`` the Lambda speed layer (allowed lateness 0) runs over the log
in arrival order; for every ``W`` and allowed lateness ``L`` the Kappa streaming job does (with
``L = 0`` it is the same job as Lambda's speed layer, run once). Each is a full pass from the
first segment with tables of its own (``kappa/<run>-w<W>-l<L>/``), so a Kappa run's cost is
also the cost of a full replay. One batch recompute gives the truth (and
Lambda's batch cost). Every configuration is then reconciled against the truth, and the
``Report`` is filled from the tables: error over processing time, latency per window, late
events absorbed or sent to the side output, costs per path, state size, gaps and the finance
audit.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import time
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Callable

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from lklab.measure import error_point, first_result_gaps, late_events_of, latency, served_series, truth_of
from lklab.report import (
    ArrivalDelay, Configuration, ConfigurationResult, FinanceAudit, GapHeatMap, LateBillingEvent, LateSummary,
    PathCost, ReconciliationSummary, Report,
)
from shared.log_source import parsed_log
from reconciliation.reconcile import reconcile
from shared.config import LabConfig
from shared.durations import parse_duration
from shared.eventlog import EventLog
from shared.events import valid_events
from shared.tables import Tables
from shared.windows import assign_windows
from spark_jobs.batch_job import run_batch
from spark_jobs.replay_job import run_replay

__all__ = ["ComparisonPlan", "run_comparison"]

Progress = Callable[[str], None]


@dataclass(frozen=True)
class ComparisonPlan:
    """What to sweep. Durations as the user wrote them (``"10s"``, ``"0"``)."""

    name: str
    watermark_delays: tuple[str, ...] = ("10s", "1m")
    allowed_lateness: tuple[str, ...] = ("0", "10m")
    segments_per_batch: int = 1

    def __post_init__(self) -> None:
        for value in (*self.watermark_delays, *self.allowed_lateness):
            parse_duration(value, name="duration")
        if not self.watermark_delays or not self.allowed_lateness:
            raise ValueError("give at least one watermark delay and one allowed lateness")
        if self.segments_per_batch < 1:
            raise ValueError(f"segments-per-batch must be at least 1, got {self.segments_per_batch}")

    def configurations(self) -> list[Configuration]:
        lambdas = [Configuration("lambda", w, "0") for w in self.watermark_delays]
        kappas = [Configuration("kappa", w, l) for w in self.watermark_delays for l in self.allowed_lateness]
        return lambdas + kappas


def _ingest_by_segment(spark: SparkSession, lake: str, last: int) -> dict[int, dt.datetime]:
    rows = parsed_log(spark, lake, last).groupBy("segment").agg(F.max("ingest_time").alias("t")).collect()
    return {r["segment"]: r["t"].replace(tzinfo=dt.timezone.utc) for r in rows if r["t"] is not None}


def _arrival(spark: SparkSession, lake: str, last: int) -> ArrivalDelay:
    parsed = parsed_log(spark, lake, last).transform(valid_events).dropDuplicates(["event_id"])
    delays = parsed.select(
        ((F.unix_micros("ingest_time") - F.unix_micros("event_time")).cast("decimal(20,0)") / F.lit(1_000_000)).cast("decimal(20,6)").alias("d")
    ).collect()
    return ArrivalDelay.of_delays(r["d"] for r in delays)


def _absorbed(spark: SparkSession, tables: Tables, lake: str, prefix: str, config: LabConfig, key: str) -> list[LateBillingEvent]:
    """Late updates: events behind a closed window's end but within the allowed lateness."""
    if config.allowed_lateness == 0 or config.window.kind == "session":
        return []
    metrics = tables.read(f"{prefix}stream_metrics").select("first_segment", "last_segment", "watermark").where("watermark IS NOT NULL")
    read_up_to = max((s for s in tables.read_arrow(f"{prefix}stream_metrics").column("last_segment").to_pylist() if s is not None), default=0)
    events = parsed_log(spark, lake, read_up_to)
    duplicates = tables.read(f"{prefix}duplicate_events").select("segment", "line_number") if tables.exists(f"{prefix}duplicate_events") else None
    events = events.transform(valid_events)
    if duplicates is not None:
        events = events.join(duplicates, ["segment", "line_number"], "left_anti")
    windowed = events.transform(assign_windows(config.window))
    joined = windowed.join(metrics, (windowed["segment"] >= metrics["first_segment"]) & (windowed["segment"] <= metrics["last_segment"]))
    end = F.unix_micros("window_end")
    late_update = (F.unix_micros("watermark") >= end) & (F.unix_micros("watermark") < end + F.lit(config.allowed_lateness))
    rows = joined.where(late_update).select(
        "event_id", "account_id", "amount", "currency", "event_time", "ingest_time", "window_start", "window_end",
        ((F.unix_micros("watermark") - F.unix_micros("event_time")).cast("decimal(20,0)") / F.lit(1_000_000)).cast("decimal(20,6)").alias("lateness"),
    ).collect()
    utc = lambda t: t.replace(tzinfo=dt.timezone.utc)
    return [
        LateBillingEvent(key, r["event_id"], r["account_id"], r["amount"], r["currency"], utc(r["event_time"]), utc(r["ingest_time"]),
                         r["lateness"], utc(r["window_start"]), utc(r["window_end"]), "absorbed")
        for r in sorted(rows, key=lambda r: (r["ingest_time"], r["event_id"], r["window_start"]))
    ]


def _gross(events: list[LateBillingEvent]) -> tuple[int, dict[str, Decimal]]:
    """Distinct events and the sum of their ``|amount|`` per currency."""
    seen: dict[str, LateBillingEvent] = {}
    for event in events:
        seen.setdefault(event.event_id, event)
    money: dict[str, Decimal] = {}
    for event in seen.values():
        money[event.currency] = money.get(event.currency, Decimal(0)) + abs(event.amount)
    return len(seen), money


def run_comparison(
    spark: SparkSession, config: LabConfig, plan: ComparisonPlan, *, source: str, progress: Progress = lambda _: None
) -> Report:
    """Run every configuration of ``plan`` over ``config.lake``'s log and measure them."""
    lake = str(Path(config.lake).resolve())
    tables = Tables(spark, lake, config.table_engine)
    last = EventLog(lake).last_segment()
    if last == 0:
        raise ValueError(f"the log under {lake} is empty: generate or ingest one first")
    configurations = plan.configurations()
    started = time.monotonic()

    progress("batch recompute: the truth from the complete log")
    batch = run_batch(spark, config, refresh=True)
    truth = truth_of(tables)
    ingest = _ingest_by_segment(spark, lake, last)
    results, heat_maps, audit = [], [], []
    streams: dict[tuple[str, str], tuple[str, object]] = {}
    for done, configuration in enumerate(configurations):
        elapsed = time.monotonic() - started
        eta = "" if not done else f", about {elapsed / done * (len(configurations) - done):.0f}s left"
        progress(f"[{done + 1}/{len(configurations)}] {configuration.label}: streaming {last:,} segments{eta}")
        run_config = dataclasses.replace(
            config,
            watermark_delay=parse_duration(configuration.watermark_delay, name="watermark-delay"),
            allowed_lateness=parse_duration(configuration.allowed_lateness, name="allowed-lateness"),
        )
        settings = (configuration.watermark_delay, configuration.allowed_lateness)
        if settings not in streams:
            # Lambda's speed layer and Kappa without allowed lateness are the same streaming job.
            run_name = f"{plan.name}-w{settings[0]}-l{settings[1]}"
            streams[settings] = (run_name, run_replay(spark, run_config, run_name, replace=True))
        run_name, stream = streams[settings]
        prefix = f"kappa/{run_name}/"
        recon = reconcile(spark, run_config, against=f"kappa:{run_name}")
        is_lambda = configuration.architecture == "lambda"
        series = served_series(tables, prefix, ingest, truth, lambda_days=is_lambda)
        points = [error_point(s, truth) for s in series]
        if is_lambda and series:
            # The nightly batch recompute at the end of the last day: Lambda then serves the truth.
            midnight = dt.datetime.combine(series[-1].processing_time.date() + dt.timedelta(days=1), dt.time(), dt.timezone.utc)
            points.append(error_point(dataclasses.replace(series[-1], processing_time=midnight, windows=dict(truth)), truth))
        side_output = late_events_of(tables, prefix, configuration.key, "folded_in" if is_lambda else "side_output")
        absorbed = _absorbed(spark, tables, lake, prefix, run_config, configuration.key)
        side_events, side_money = _gross(side_output)
        absorbed_events, absorbed_money = _gross(absorbed)
        metrics = tables.read_arrow(f"{prefix}stream_metrics")
        stream_cost = PathCost("speed" if is_lambda else "streaming", stream.cpu_seconds, stream.wall_seconds)
        second = PathCost("batch", batch.cpu_seconds, batch.wall_seconds) if is_lambda else PathCost("replay", stream.cpu_seconds, stream.wall_seconds)
        # At the end of the run Lambda serves the nightly batch's truth; Kappa serves its stream.
        served_money = {c.currency: (c.truth_amount if is_lambda else c.stream_amount) for c in recon.currencies}
        results.append(
            ConfigurationResult(
                configuration=configuration,
                error_series=tuple(points),
                latency=latency(series, truth),
                late=LateSummary(side_events, side_money, absorbed_events, absorbed_money),
                costs=(stream_cost, second),
                state_rows_max=max(metrics.column("state_rows").to_pylist() or [0]),
                reconciliation=ReconciliationSummary(
                    windows_compared=sum(c.windows_compared for c in recon.currencies),
                    windows_exact=sum(c.windows_compared for c in recon.currencies) if is_lambda else sum(c.windows_matched for c in recon.currencies),
                    served_money=served_money,
                    truth_money={c.currency: c.truth_amount for c in recon.currencies},
                    unexplained_windows=sum(c.unexplained_windows for c in recon.currencies),
                    unexplained_money={c.currency: c.unexplained_money for c in recon.currencies},
                ),
            )
        )
        for currency, cells in sorted(first_result_gaps(series, truth).items()):
            heat_maps.append(GapHeatMap(configuration.key, currency, tuple(cells)))
        audit.extend(absorbed + side_output)
    progress(f"measured {len(configurations)} configurations in {time.monotonic() - started:.0f}s")
    return Report(
        run_id=plan.name,
        source=source,
        window=config.window.describe(),
        generated_at=dt.datetime.now(dt.timezone.utc).replace(microsecond=0),
        events=batch.events,
        arrival_delay=_arrival(spark, lake, last),
        results=tuple(results),
        heat_maps=tuple(heat_maps),
        audit=FinanceAudit(tuple(audit)),
        cost_scope=stream.cost_scope if configurations else "driver and local executors",
    )

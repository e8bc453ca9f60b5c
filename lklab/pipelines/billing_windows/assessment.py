"""The comparison's measurements: what each configuration served, against the truth.

``lklab.pipelines.billing_windows.comparison`` runs the streams, the replays and Lambda's nightly batches; this module
only measures what they produced, on the processing-time clock (``lklab.pipelines.billing_windows.measure``): the error
over time, latency, the state at the end, late events folded in, absorbed or left in the side
output, the final gaps per window, and each architecture's costs. Nothing here runs Spark.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import pyarrow as pa

from lklab.pipelines.billing_windows import measure
from lklab.report import (
    Configuration,
    ConfigurationResult,
    GapHeatMap,
    PathCost,
    ReconciliationSummary,
    StreamRun,
)
from shared.durations import parse_duration
from shared.windows import WindowSpec

__all__ = ["DAY", "MeasuredStream", "Assessment", "assess", "midnights"]

DAY = 86_400_000_000


@dataclass(frozen=True)
class MeasuredStream:
    """One stream setting, run live and replayed (see the module docstring)."""

    run: StreamRun
    live: PathCost
    replay: PathCost
    reconciliation: PathCost
    unexplained: ReconciliationSummary
    served: measure.Served
    history: pa.Table
    late_events: pa.Table
    state_rows_max: int


def midnights(after: int, until: int) -> list[int]:
    """UTC midnights ``M`` with ``after < M <= until`` (microseconds)."""
    first = (after // DAY + 1) * DAY
    return list(range(first, until + 1, DAY))


@dataclass(frozen=True)
class Assessment:
    """Every configuration's result, the heat maps of the final gaps, the finance audit rows,
    and Lambda's batch landings (processing time, the truth it serves from then on)."""

    results: tuple[ConfigurationResult, ...]
    heat_maps: tuple[GapHeatMap, ...]
    audit: tuple
    landings: list


def assess(
    configurations: list[Configuration],
    *,
    window: WindowSpec,
    truth: dict,
    streams: dict[tuple[int, int], MeasuredStream],
    landings: list,
    batch_cost: PathCost,
    firsts: pa.Table,
    log_last: int,
    error_step: str,
) -> Assessment:
    """Measure every configuration against ``truth`` (see the module docstring). ``landings``:
    the nightly recomputes within the log; the last one, reading the whole log, is added here."""
    landings = list(landings)
    latest_start = max((k[0] for k in truth), default=log_last)
    final_landing = midnights(max(log_last, latest_start), max(log_last, latest_start) + DAY)[0]
    landings += [(m, {k: v for k, v in truth.items() if k[0] < m}) for m in midnights(log_last, final_landing)]
    served: dict[str, measure.Served] = {}
    for c in configurations:
        if c.is_baseline:
            served[c.key] = measure.served_by_processing_time(window, firsts)
        else:
            stream = streams[(parse_duration(c.watermark_delay), parse_duration(c.allowed_lateness))]
            served[c.key] = (
                measure.with_nightly_batches(stream.served, landings) if c.architecture == "lambda" else stream.served
            )
    end = max([final_landing, *(k[1] for k in truth), *(k[1] for s in served.values() for k in s.changes)])
    step = parse_duration(error_step)
    kappa_streams = {
        (parse_duration(c.watermark_delay), parse_duration(c.allowed_lateness))
        for c in configurations
        if c.architecture == "kappa"
    }

    results, heat_maps, audit = [], [], []
    for c in configurations:
        answer = served[c.key]
        stream = (
            None if c.is_baseline else streams[(parse_duration(c.watermark_delay), parse_duration(c.allowed_lateness))]
        )
        late, costs = None, ()
        if c.architecture == "lambda":
            folded = measure.late_rows(stream.late_events, c.key, "folded_in") if stream.late_events is not None else []
            late, costs = measure.late_summary(folded, []), (stream.live, batch_cost, stream.reconciliation)
            audit += folded
        elif c.architecture == "kappa":
            side = measure.late_rows(stream.late_events, c.key, "side_output") if stream.late_events is not None else []
            absorbed = measure.late_rows(stream.history.filter(stream.history["late_update"]), c.key, "absorbed")
            late, costs = (
                measure.late_summary(side, absorbed),
                (dataclasses.replace(stream.live, path="streaming"), stream.replay),
            )
            audit += absorbed + side
        results.append(
            ConfigurationResult(
                configuration=c,
                error_series=measure.error_series(answer, truth, end, step),
                latency=measure.latency(answer, truth, completeness=not c.is_baseline),
                end=measure.at_end(answer, truth, end),
                late=late,
                costs=costs,
                state_rows_max=None if stream is None else stream.state_rows_max,
                reconciliation=None if stream is None else stream.unexplained,
            )
        )
        # Lambda's speed layer answers as Kappa's stream at L=0 until the batch lands: one map for both.
        if c.architecture != "lambda" or (parse_duration(c.watermark_delay), 0) not in kappa_streams:
            for currency, cells in sorted(measure.final_gaps(answer, truth).items()):
                heat_maps.append(GapHeatMap(c.key, currency, tuple(cells)))
    return Assessment(tuple(results), tuple(heat_maps), tuple(audit), landings)

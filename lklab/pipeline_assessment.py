"""The comparison's figures for a pipeline other than billing, from what its runs wrote.

``lklab.pipelines.unique_visitors.comparison`` and ``lklab.pipelines.order_payments.comparison`` run the streams, the replays,
the reconciliations and the batch, and turn their tables into ``Outputs`` (the truth, each
output's due time and kind) and one ``MeasuredStream`` per stream setting (its timelines and the
counts its tables hold); ``assess`` measures every configuration alike (``lklab.served_outputs``).
Nothing here runs Spark.

**Lambda** at watermark delay ``W``: the stream ``(W, 0)`` is its speed layer, until its batch
recompute of the whole log lands (``batch_landing``: the first UTC midnight of processing time
after the log's last line and every output's due time); from then on it serves the truth.
Costs: the speed layer, the batch, the reconciliation of the speed layer.
**Kappa** at ``(W, L)``: the stream alone. Costs: the live stream and a full replay.
**The end**: the latest of the landing, every due time and every change served: one moment for
every configuration.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from lklab import served_outputs
from lklab.report.model import Configuration, PathCost
from lklab.report.pipeline_model import ErrorCount, LatencyFigure, PipelineReport, PipelineResult, StreamCheck
from shared.durations import parse_duration

__all__ = [
    "DAY",
    "Outputs",
    "MeasuredStream",
    "batch_landing",
    "measurement_end",
    "landing_and_end",
    "assess",
    "assessed_report",
    "to_utc",
    "setting_of",
]

DAY = 86_400_000_000
Key = tuple


def to_utc(moment: int) -> dt.datetime:
    return dt.datetime(1970, 1, 1, tzinfo=dt.UTC) + dt.timedelta(microseconds=int(moment))


def setting_of(configuration: Configuration) -> tuple[int, int]:
    """The stream setting ``(W, L)`` in microseconds a configuration is measured on."""
    return parse_duration(configuration.watermark_delay), parse_duration(configuration.allowed_lateness)


@dataclass(frozen=True)
class Outputs:
    """The truth's ``values``; ``due`` for every key of the truth or of any stream; ``kind_of``
    a truth key (the latency's kinds) and ``wrong_kind`` of a wrong key given ``(served, truth)``
    values (``None`` where there is none)."""

    values: Mapping[Key, object]
    due: Mapping[Key, int]
    kinds: tuple[str, ...]
    kind_of: Callable[[Key], str]
    wrong_kind: Callable[[Key, object, object], str]

    def truth_counts(self) -> dict[str, int]:
        counts = dict.fromkeys(self.kinds, 0)
        for key in self.values:
            counts[self.kind_of(key)] += 1
        return counts


@dataclass(frozen=True)
class MeasuredStream:
    """One stream setting's run, as its tables hold it. ``reconciled_wrong``: outputs whose
    served value differs from the truth by its reconciliation (checked against the timelines)."""

    check: StreamCheck
    served: Mapping[Key, served_outputs.Timeline]
    side_output: Mapping[str, int]
    late: frozenset | None  # the late (line, window) pairs, where the allowed lateness applies
    duplicates: int
    dead_letters: int
    state_peak: int
    state_final: int
    live: PathCost
    replay: PathCost
    reconciliation_cost: PathCost
    reconciliation: Mapping[str, int]
    unexplained: int
    reconciled_wrong: int


def batch_landing(log_last: int, latest_due: int) -> int:
    """The first UTC midnight after both (microseconds)."""
    return (max(log_last, latest_due) // DAY + 1) * DAY


def measurement_end(landing: int, outputs: Outputs, streams: Mapping[tuple[int, int], MeasuredStream]) -> int:
    changes = (t for s in streams.values() for timeline in s.served.values() for t, _ in timeline)
    return max(landing, max(outputs.due.values(), default=landing), max(changes, default=landing))


def landing_and_end(
    log_end: int, outputs: Outputs, streams: Mapping[tuple[int, int], MeasuredStream]
) -> tuple[int, int]:
    """The batch's landing after a log ending at ``log_end`` and the moment of the end (microseconds)."""
    landing = batch_landing(log_end, max(outputs.due.values(), default=log_end))
    return landing, measurement_end(landing, outputs, streams)


def _wrong_kinds(outputs: Outputs, served: Mapping, moment: int) -> dict[str, int]:
    kinds: dict[str, int] = {}
    for key in served_outputs.wrong_at(served, outputs.values, outputs.due, moment):
        kind = outputs.wrong_kind(key, served_outputs.value_at(served.get(key, ()), moment), outputs.values.get(key))
        kinds[kind] = kinds.get(kind, 0) + 1
    return dict(sorted(kinds.items()))


def assess(
    configurations: list[Configuration],
    *,
    outputs: Outputs,
    streams: Mapping[tuple[int, int], MeasuredStream],
    batch_cost: PathCost,
    landing: int,
    end: int,
    error_step: str,
) -> tuple[PipelineResult, ...]:
    """Every configuration's result (see the module docstring)."""
    step = parse_duration(error_step, name="error-step")
    for stream in streams.values():  # the reconciliation and the timelines must say the same
        wrong = len(served_outputs.wrong_at(stream.served, outputs.values, outputs.due, end))
        if wrong != stream.reconciled_wrong:
            raise RuntimeError(
                f"stream W={stream.check.watermark_delay} L={stream.check.allowed_lateness}: its tables serve "
                f"{wrong} outputs wrong at the end, its reconciliation {stream.reconciled_wrong}"
            )
    results = []
    for configuration in configurations:
        delay, lateness = setting_of(configuration)
        stream = streams[(delay, lateness)]
        if configuration.architecture == "lambda":
            served = served_outputs.with_landing(stream.served, outputs.values, landing)
            before = _wrong_kinds(outputs, stream.served, landing - 1)
            costs = (stream.live, batch_cost, stream.reconciliation_cost)
            absorbed = 0 if stream.late is not None else None
        else:
            served, before = stream.served, None
            costs = (dataclasses.replace(stream.live, path="streaming"), stream.replay)
            speed = streams[(delay, 0)].late
            absorbed = None if stream.late is None else len(speed - stream.late)
        latency = served_outputs.latency_seconds(served, outputs.values, outputs.due)
        by_kind = {
            kind: LatencyFigure.of(v for k, v in latency.items() if outputs.kind_of(k) == kind)
            for kind in outputs.kinds
        }
        results.append(
            PipelineResult(
                configuration=configuration,
                compared=len(
                    outputs.values.keys()
                    | {k for k, timeline in served.items() if timeline and timeline[-1][1] is not None}
                ),
                wrong_at_end=_wrong_kinds(outputs, served, end),
                wrong_before_batch=before,
                error_series=tuple(
                    ErrorCount(to_utc(t), n)
                    for t, n in served_outputs.error_series(served, outputs.values, outputs.due, end, step)
                ),
                latency=by_kind,
                side_output=stream.side_output,
                absorbed=absorbed,
                duplicates=stream.duplicates,
                dead_letters=stream.dead_letters,
                state_peak=stream.state_peak,
                state_final=stream.state_final,
                costs=costs,
                reconciliation=stream.reconciliation,
                unexplained=stream.unexplained,
            )
        )
    return tuple(results)


def assessed_report(
    plan,
    outputs: Outputs,
    streams: Mapping[tuple[int, int], MeasuredStream],
    batch_cost: PathCost,
    log_end: int,
    described: Mapping[str, object],
) -> PipelineReport:
    """``assess`` every configuration of ``plan`` (``lklab.comparison_runs.ComparisonPlan``) at the
    landing and end a log ending at ``log_end`` gives, as a ``PipelineReport``; ``described``: the
    pipeline's own fields (``pipeline``, ``rule``, ``due``, ``state_unit``, ``log``,
    ``state_sizes``, ``source``, ``cost_scope``)."""
    configurations, run_id, error_step = plan.configurations(), plan.name, plan.error_step
    landing, end = landing_and_end(log_end, outputs, streams)
    results = assess(
        configurations,
        outputs=outputs,
        streams=streams,
        landing=landing,
        end=end,
        error_step=error_step,
        batch_cost=batch_cost,
    )
    return PipelineReport(
        run_id=run_id,
        generated_at=dt.datetime.now(dt.UTC).replace(microsecond=0),
        truth=outputs.truth_counts(),
        results=results,
        streams=tuple(s.check for s in streams.values()),
        log_end=to_utc(log_end),
        batch_landing=to_utc(landing),
        end=to_utc(end),
        error_step=error_step,
        **described,
    )

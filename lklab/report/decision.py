"""The first screen's answer: which architecture, which watermark delay, and what it would cost.

Computed from a report (billing's ``Report`` or a pipeline's ``PipelineReport``), rendered by
both pages, ``summary.md`` and ``summary.json`` alike (``headline_table`` formats every figure
once).

**The candidates** are the swept Lambda and Kappa configurations (the processing-time baseline
runs no job and is no candidate). The *criterion* is the figure the target applies to:
billing's completeness when final (events in each window's answer when declared final, over
events in truth); a pipeline without it, its outputs exactly right at the end.

**The rule**, until an advisor computes the whole watermark-delay curve: the cheapest candidate
whose criterion reaches ``target_completeness``; ties go to the shorter delay, then the report's
order. None reaching it: the cheapest of those with the highest criterion. The same rule within
each architecture picks the configuration its headline shows.

**Cost per day** at ``events_per_second``: ``lklab.report.daily_cost`` (the daily paths, their
split into fixed and per-line parts, and why a figure is a lower bound,
``per_day_lower_bound``); the ranking uses it alike for every candidate, and uses the CPU on
this log instead when a candidate has no split path at all. Costs per day that differ by less
than the standard error of their difference (the per-line slopes' errors, combined; a slope fit
through two runs has none to add) do not tell candidates apart: among those within it of the
cheapest, CPU on this log decides, and the rule says so. ``Decision.method`` says in words how
each path was measured and which were not split.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import ROUND_HALF_EVEN, Decimal

from . import formats
from .curve import CurvePoint, WatermarkCurve
from .daily_cost import DAILY_NAMES, cost_method, daily_costs
from .model import Report
from .pipeline_model import PipelineReport
from .scaling import CostScaling

__all__ = ["Candidate", "Decision", "decide", "headline_table"]

_RATIO = Decimal("0.0001")


def _ratio(numerator: int, denominator: int) -> Decimal | None:
    if not denominator:
        return None
    return (Decimal(numerator) / Decimal(denominator)).quantize(_RATIO, rounding=ROUND_HALF_EVEN)


@dataclass(frozen=True)
class Candidate:
    """One swept configuration as the decision reads it. ``latencies``: ``(name, p50, p95)``
    seconds; ``money_wrong``: at the end, per currency (billing only). Costs: CPU seconds on this
    log (every path), per million lines (the daily paths' split parts; ``None``: none split), per
    day at the report's rate, each with the standard error of the per-line slopes that have one
    (``stderr_complete``: every split path has one; else the error is at least that);
    ``unsplit``: the daily paths measured at one size; ``replay_scaling``: the full replay's
    split, where it has one; ``measured``: ``(path, split or None)`` for each path costed, in the
    report's order."""

    key: str
    label: str
    architecture: str
    delay_seconds: Decimal
    criterion: Decimal | None
    exact_at_end: Decimal | None
    completeness_when_final: Decimal | None
    latencies: tuple[tuple[str, Decimal | None, Decimal | None], ...]
    money_wrong: Mapping[str, Decimal]
    cpu_seconds: float
    replay_cpu_seconds: float | None
    cpu_per_million_lines: float | None
    cpu_per_million_stderr: float | None
    cpu_per_day: float | None
    cpu_per_day_stderr: float | None
    stderr_complete: bool
    unsplit: tuple[str, ...] = ()
    replay_scaling: CostScaling | None = None
    measured: tuple[tuple[str, CostScaling | None], ...] = ()

    @property
    def per_day_lower_bound(self) -> bool:
        return bool(self.unsplit) and self.cpu_per_day is not None


@dataclass(frozen=True)
class Decision:
    """The answer (see the module docstring): ``recommended`` and ``headline`` (one per
    architecture, Lambda first) are candidate keys; ``rule`` and ``sentences`` say it in words,
    ``method`` how the costs were measured."""

    criterion: str
    target: Decimal
    events_per_second: float
    candidates: tuple[Candidate, ...]
    recommended: str | None
    headline: tuple[str, ...]
    rule: str
    sentences: tuple[str, ...]
    curve: WatermarkCurve | None = field(default=None)
    advised: CurvePoint | None = field(default=None)
    method: str = ""

    def candidate(self, key: str) -> Candidate:
        return next(c for c in self.candidates if c.key == key)


def _candidate(configuration, costs, rate: float, **figures) -> Candidate:
    """A swept ``configuration`` as a candidate: its ``figures`` and its costs at ``rate``."""
    return Candidate(
        key=configuration.key,
        label=configuration.label,
        architecture=configuration.architecture,
        delay_seconds=configuration.watermark_delay_seconds,
        **figures,
        **daily_costs(costs, configuration.architecture, rate),
    )


def _billing_candidates(report: Report) -> list[Candidate]:
    candidates = []
    for r in report.results:
        if r.configuration.is_baseline:
            continue
        latency = r.latency
        completeness = (
            None if latency.events_when_final is None else _ratio(latency.events_when_final, latency.truth_events)
        )
        candidates.append(
            _candidate(
                r.configuration,
                r.costs,
                report.events_per_second,
                criterion=completeness,
                exact_at_end=_ratio(r.end.windows_exact, r.end.windows_compared),
                completeness_when_final=completeness,
                latencies=(("time until final", latency.final_p50, latency.final_p95),),
                money_wrong=dict(r.error_series[-1].money_wrong) if r.error_series else {},
                cpu_seconds=sum(p.cpu_seconds for p in r.costs),
            )
        )
    return candidates


def _pipeline_candidates(report: PipelineReport) -> list[Candidate]:
    candidates = []
    for r in report.results:
        exact = _ratio(r.compared - r.wrong, r.compared)
        candidates.append(
            _candidate(
                r.configuration,
                r.costs,
                report.events_per_second,
                criterion=exact,
                exact_at_end=exact,
                completeness_when_final=None,
                latencies=tuple((f"{kind}: time until exactly right", f.p50, f.p95) for kind, f in r.latency.items()),
                money_wrong={},
                cpu_seconds=r.cpu_seconds,
            )
        )
    return candidates


def _per_day_stderr(candidate: Candidate) -> float:
    """The standard error of ``candidate``'s cost per day as far as it is known (0: none known)."""
    return candidate.cpu_per_day_stderr or 0.0


def _cheapest(candidates: list[Candidate]) -> tuple[Candidate, bool]:
    """The cheapest of ``candidates`` (ties: shorter delay, then the report's order), and whether
    CPU on this log decided it (the costs per day do not tell the cheapest ones apart).

    By cost per day where every candidate has one; but the candidates whose cost per day is within
    the standard error of the difference from the cheapest's are not told apart by it, and among
    those CPU on this log decides."""
    order = {c.key: i for i, c in enumerate(candidates)}
    if not all(c.cpu_per_day is not None for c in candidates):
        return min(candidates, key=lambda c: (c.cpu_seconds, c.delay_seconds, order[c.key])), False
    first = min(candidates, key=lambda c: (c.cpu_per_day, c.delay_seconds, order[c.key]))
    close = [
        c
        for c in candidates
        if c.cpu_per_day - first.cpu_per_day <= math.hypot(_per_day_stderr(c), _per_day_stderr(first))
    ]
    chosen = min(close, key=lambda c: (c.cpu_seconds, c.delay_seconds, order[c.key]))
    return chosen, len(close) > 1


def _choose(candidates: list[Candidate], target: Decimal) -> tuple[Candidate | None, bool]:
    """The rule of the module docstring: the chosen candidate, and whether CPU on this log decided
    among candidates the costs per day do not tell apart."""
    if not candidates:
        return None, False
    meeting = [c for c in candidates if c.criterion is not None and c.criterion >= target]
    if meeting:
        return _cheapest(meeting)
    best = max(c.criterion or Decimal(-1) for c in candidates)
    return _cheapest([c for c in candidates if (c.criterion or Decimal(-1)) == best])


def _plus_minus(candidate: Candidate, stderr: float | None) -> str:
    """`` ± E`` (`` ± ≥ E`` where a split path adds an error nobody measured), or nothing."""
    if stderr is None:
        return ""
    return f" ± {'' if candidate.stderr_complete else '≥ '}{stderr:,.1f}"


def _per_day(candidate: Candidate) -> str:
    if candidate.cpu_per_day is None:
        return "—"
    hours = candidate.cpu_per_day / 3600
    error = None if candidate.cpu_per_day_stderr is None else candidate.cpu_per_day_stderr / 3600
    return ("at least " if candidate.per_day_lower_bound else "") + f"{hours:,.1f}{_plus_minus(candidate, error)} CPU-h"


def _sentence(candidate: Candidate, rate: str) -> str:
    paths = "speed layer, nightly batch and reconciliation" if candidate.architecture == "lambda" else "streaming job"
    text = f"{candidate.label} would cost this log {candidate.cpu_seconds:,.1f} CPU s"
    if candidate.cpu_per_day is not None:
        about = "" if candidate.per_day_lower_bound else "about "
        text += f"; at {rate} events/s {about}{_per_day(candidate)} a day ({paths})"
        if candidate.unsplit:
            named = " and ".join(DAILY_NAMES.get(p, p) for p in candidate.unsplit)
            text += f", its {named} measured at one size and counted once a day"
    if candidate.replay_cpu_seconds is not None:
        text += f"; a full replay of this log took {candidate.replay_cpu_seconds:,.1f} CPU s"
        split = candidate.replay_scaling
        if split is not None:
            text += f" ({split.fixed_cpu_seconds:,.1f} s fixed + {split.per_million_lines:,.1f} s per million lines)"
    return text + "."


def decide(report: Report | PipelineReport) -> Decision:
    """The first screen's answer for ``report`` (see the module docstring)."""
    billing = isinstance(report, Report)
    candidates = _billing_candidates(report) if billing else _pipeline_candidates(report)
    target, rate = report.target_completeness, report.events_per_second
    criterion = "completeness when final" if billing else "outputs exactly right at the end"
    chosen, by_this_log = _choose(candidates, target)
    headline = []
    for architecture in ("lambda", "kappa"):
        best, _ = _choose([c for c in candidates if c.architecture == architecture], target)
        if best is not None:
            headline.append(best.key)
    shown_rate = f"{rate:,.0f}" if rate == int(rate) else f"{rate:,}"
    by = (
        f"CPU per day at {shown_rate} events/s"
        if all(c.cpu_per_day is not None for c in candidates)
        else "CPU on this log"
    )
    if by_this_log:
        by += (
            ", and CPU on this log among those whose costs per day differ by less than the standard error of "
            "their difference"
        )
    if chosen is None:
        rule = "No Lambda or Kappa configuration was swept: nothing to recommend."
    elif chosen.criterion is not None and chosen.criterion >= target:
        rule = (
            f"Recommended: {chosen.label}, the cheapest of the {len(candidates)} swept configurations ({by}) whose "
            f"{criterion} reaches {formats.ratio(target)}; ties go to the shorter watermark delay. A rule over the "
            "configurations swept, not an optimum over every delay."
        )
    else:
        rule = (
            f"No swept configuration reaches {formats.ratio(target)} {criterion}: recommended {chosen.label}, the "
            f"most complete of the {len(candidates)} ({by} breaks ties)."
        )
    # The advisor's curve measures completeness when final as the billing page does; a pipeline's
    # page judges outputs exactly right, another figure: its curve stays in summary.json only.
    curve = report.watermark_curve if billing else None
    advised = None
    if curve is not None:
        advised = next(
            (p for p in curve.points if p.completeness_when_final is not None and p.completeness_when_final >= target),
            None,
        )
        rule += (
            f" On the advisor's exact curve (allowed lateness {curve.allowed_lateness}), the smallest watermark delay "
            f"of the curve whose completeness when final reaches {formats.ratio(target)} is {advised.watermark_delay} "
            f"(time until final, median / p95: {_seconds_pair(advised.final_p50, advised.final_p95)}; "
            f"{advised.late_events:,} late (event, window) pairs)."
            if advised is not None
            else f" No delay of the advisor's exact curve (allowed lateness {curve.allowed_lateness}) reaches "
            f"{formats.ratio(target)} completeness when final."
        )
    return Decision(
        criterion=criterion,
        target=target,
        events_per_second=rate,
        candidates=tuple(candidates),
        recommended=None if chosen is None else chosen.key,
        headline=tuple(headline),
        rule=rule,
        sentences=tuple(_sentence(next(c for c in candidates if c.key == k), shown_rate) for k in headline),
        curve=curve,
        advised=advised,
        method=cost_method((c.architecture, c.measured) for c in candidates),
    )


def _seconds_pair(p50: Decimal | None, p95: Decimal | None) -> str:
    shown = lambda v: "—" if v is None else formats.seconds(v)  # noqa: E731
    return f"{shown(p50)} / {shown(p95)}"


def _per_million(candidate: Candidate) -> str:
    if candidate.cpu_per_million_lines is None:
        return "—"
    text = ("≥ " if candidate.unsplit else "") + f"{candidate.cpu_per_million_lines:,.1f} s"
    return text + _plus_minus(candidate, candidate.cpu_per_million_stderr)


def headline_table(decision: Decision) -> tuple[tuple[str, ...], tuple[tuple[str, ...], ...]]:
    """``(header, rows)`` of the first screen's table: one column per architecture's headline
    configuration, every cell formatted as every renderer shows it."""
    shown = [decision.candidate(k) for k in decision.headline]
    header = ("", *(c.label for c in shown))
    rows: list[tuple[str, ...]] = [
        (
            "exactly right at the end",
            *("—" if c.exact_at_end is None else formats.ratio(c.exact_at_end) for c in shown),
        )
    ]
    if any(c.completeness_when_final is not None for c in shown):
        rows.append(
            (
                "completeness when final",
                *("—" if v is None else formats.ratio(v) for v in (c.completeness_when_final for c in shown)),
            )
        )
    for index, (name, _, _) in enumerate(shown[0].latencies if shown else ()):
        rows.append((f"{name}, median / p95", *(_seconds_pair(*c.latencies[index][1:]) for c in shown)))
    for currency in sorted({cur for c in shown for cur in c.money_wrong}):
        rows.append(
            (
                f"money wrong at the end ({currency})",
                *(formats.money(c.money_wrong.get(currency, Decimal(0)), currency) for c in shown),
            )
        )
    rate = decision.events_per_second
    shown_rate = f"{rate:,.0f}" if rate == int(rate) else f"{rate:,}"
    rows += [
        ("CPU per million lines", *(_per_million(c) for c in shown)),
        (f"CPU per day at {shown_rate} events/s", *(_per_day(c) for c in shown)),
        ("CPU on this log", *(f"{c.cpu_seconds:,.1f} s" for c in shown)),
    ]
    return header, tuple(rows)

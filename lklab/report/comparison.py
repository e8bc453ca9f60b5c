"""The side-by-side table: one row per metric, one column per configuration, winners marked.

Each row says which direction is better (``lower`` or ``higher``; ``None`` for a figure that is
shown but not judged). Values are compared exactly as they are shown: ratios as fractions with
four places (a percentage with two), seconds with three places, money exact. A row's winners
are every configuration holding the best value (all of them on a tie); a row with fewer than two
values, or whose values are all equal, has no winner. ``None`` means the figure does not apply
or was not measured (a path the architecture does not run, a latency no window reached, a
stream's figure for the processing-time baseline, which runs no stream).

Money rows are one per currency; a currency absent from a configuration's figure counts as zero.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from decimal import ROUND_HALF_EVEN, Decimal
from typing import Literal

from .model import PATH_NAMES, PATHS, Configuration, ConfigurationResult, Report

__all__ = ["GROUPS", "ComparisonRow", "Comparison", "compare", "winners"]

GROUPS = ("correctness", "latency", "cost")
Value = Decimal | int | None

_RATIO = Decimal("0.0001")
_SECONDS = Decimal("0.001")


@dataclass(frozen=True)
class ComparisonRow:
    """``unit``: ``ratio`` (a fraction, shown as a percentage), ``s``, a count noun, or a currency."""

    group: Literal["correctness", "latency", "cost"]
    metric: str
    unit: str
    better: Literal["lower", "higher"] | None
    values: tuple[Value, ...]
    winners: tuple[int, ...]


@dataclass(frozen=True)
class Comparison:
    configurations: tuple[Configuration, ...]
    rows: tuple[ComparisonRow, ...]


def winners(values: tuple[Value, ...], better: str | None) -> tuple[int, ...]:
    """Indexes of the best values (all tied ones); none when unjudged, alone, or all equal."""
    present = [v for v in values if v is not None]
    if better is None or len(present) < 2 or len(set(present)) == 1:
        return ()
    best = min(present) if better == "lower" else max(present)
    return tuple(i for i, v in enumerate(values) if v is not None and v == best)


def _ratio(numerator: int, denominator: int) -> Decimal | None:
    if denominator == 0:
        return None
    return (Decimal(numerator) / Decimal(denominator)).quantize(_RATIO, rounding=ROUND_HALF_EVEN)


def _money_ratio(served: Decimal, truth: Decimal) -> Decimal | None:
    """Net served money over net truth money; ``None`` when truth nets to zero."""
    if truth == 0:
        return None
    return (served / truth).quantize(_RATIO, rounding=ROUND_HALF_EVEN)


def _quantize(value: Decimal | float | None, places: Decimal) -> Decimal | None:
    if value is None:
        return None
    return Decimal(str(value)).quantize(places, rounding=ROUND_HALF_EVEN)


def _seconds(value: Decimal | float | None) -> Decimal | None:
    return _quantize(value, _SECONDS)


def _commit(r: ConfigurationResult, quantile: str) -> Decimal | None:
    """A quantile of the live run's micro-batches from start to commit, over their lines
    (``lklab.report.commit_time``); None for a configuration without a live run."""
    timed = r.commit_time
    return None if timed is None else _seconds(getattr(timed, quantile))


def _currencies(results: tuple[ConfigurationResult, ...], money: Callable[[ConfigurationResult], dict]) -> list[str]:
    return sorted({currency for r in results for currency in money(r)})


def _total(r: ConfigurationResult, seconds: Callable) -> Decimal | None:
    """A sum of per-path seconds as each is shown (``None`` when nothing was measured)."""
    return sum((_seconds(seconds(c)) for c in r.costs), Decimal(0)) if r.costs else None


def _rows(results: tuple[ConfigurationResult, ...]) -> list[tuple]:
    """(group, metric, unit, better, value of one result) for every row, in display order."""
    rows: list[tuple] = [
        (
            "correctness",
            "windows exactly right at the end",
            "ratio",
            "higher",
            lambda r: _ratio(r.end.windows_exact, r.end.windows_compared),
        ),
        (
            "correctness",
            "completeness when final",
            "ratio",
            "higher",
            lambda r: (
                None
                if r.latency.events_when_final is None
                else _ratio(r.latency.events_when_final, r.latency.truth_events)
            ),
        ),
        (
            "correctness",
            "peak windows wrong",
            "windows",
            "lower",
            lambda r: max((p.windows_wrong for p in r.error_series), default=None),
        ),
        (
            "correctness",
            "windows wrong at the end",
            "windows",
            "lower",
            lambda r: r.error_series[-1].windows_wrong if r.error_series else None,
        ),
    ]
    for currency in _currencies(results, lambda r: r.end.truth_money):
        rows.append(
            (
                "correctness",
                f"net money served, share of the truth's net at the end ({currency}; errors of opposite sign cancel)",
                "ratio",
                None,
                lambda r, c=currency: _money_ratio(
                    r.end.served_money.get(c, Decimal(0)), r.end.truth_money.get(c, Decimal(0))
                ),
            )
        )
    final_wrong = lambda r: r.error_series[-1].money_wrong if r.error_series else {}
    for currency in _currencies(results, final_wrong):
        rows.append(
            (
                "correctness",
                f"money wrong at the end ({currency})",
                currency,
                "lower",
                lambda r, c=currency: final_wrong(r).get(c, Decimal(0)) if r.error_series else None,
            )
        )
    late = lambda r: r.late.side_output_money if r.late else {}
    absorbed = lambda r: r.late.absorbed_money if r.late else {}
    rows.append(
        (
            "correctness",
            "late events to side output",
            "events",
            "lower",
            lambda r: r.late.side_output_events if r.late else None,
        )
    )
    for currency in _currencies(results, late):
        rows.append(
            (
                "correctness",
                f"late money to side output, absolute ({currency})",
                currency,
                "lower",
                lambda r, c=currency: r.late.side_output_money.get(c, Decimal(0)) if r.late else None,
            )
        )
        rows.append(
            (
                "correctness",
                f"late money to side output, net ({currency})",
                currency,
                None,
                lambda r, c=currency: r.late.side_output_net.get(c, Decimal(0)) if r.late else None,
            )
        )
    rows.append(
        ("correctness", "late events absorbed", "events", None, lambda r: r.late.absorbed_events if r.late else None)
    )
    for currency in _currencies(results, absorbed):
        rows.append(
            (
                "correctness",
                f"late money absorbed, absolute ({currency})",
                currency,
                None,
                lambda r, c=currency: r.late.absorbed_money.get(c, Decimal(0)) if r.late else None,
            )
        )
        rows.append(
            (
                "correctness",
                f"late money absorbed, net ({currency})",
                currency,
                None,
                lambda r, c=currency: r.late.absorbed_net.get(c, Decimal(0)) if r.late else None,
            )
        )
    unexplained = lambda r: r.reconciliation.unexplained_money if r.reconciliation else {}
    rows.append(
        (
            "correctness",
            "unexplained windows",
            "windows",
            "lower",
            lambda r: r.reconciliation.unexplained_windows if r.reconciliation else None,
        )
    )
    for currency in _currencies(results, unexplained):
        rows.append(
            (
                "correctness",
                f"unexplained money ({currency})",
                currency,
                "lower",
                lambda r, c=currency: (
                    r.reconciliation.unexplained_money.get(c, Decimal(0)) if r.reconciliation else None
                ),
            )
        )
    rows += [
        ("latency", "time to first result, median", "s", "lower", lambda r: _seconds(r.latency.first_result_p50)),
        ("latency", "time to first result, p95", "s", "lower", lambda r: _seconds(r.latency.first_result_p95)),
        ("latency", "windows never served", "windows", "lower", lambda r: r.latency.never_emitted),
        ("latency", "time until final, median", "s", "lower", lambda r: _seconds(r.latency.final_p50)),
        ("latency", "time until final, p95", "s", "lower", lambda r: _seconds(r.latency.final_p95)),
        ("latency", "windows never final", "windows", "lower", lambda r: r.latency.never_final),
        ("latency", "time until exactly right, median", "s", "lower", lambda r: _seconds(r.latency.exact_p50)),
        ("latency", "time until exactly right, p95", "s", "lower", lambda r: _seconds(r.latency.exact_p95)),
        ("latency", "windows never exactly right", "windows", "lower", lambda r: r.latency.never_exact),
        ("latency", "live micro-batch, start to commit, median", "s", "lower", lambda r: _commit(r, "p50")),
        ("latency", "live micro-batch, start to commit, p95", "s", "lower", lambda r: _commit(r, "p95")),
    ]
    for path in PATHS:
        rows.append(
            (
                "cost",
                f"CPU, {PATH_NAMES[path]}",
                "s",
                "lower",
                lambda r, p=path: _seconds(r.cost(p).cpu_seconds) if r.cost(p) else None,
            )
        )
        rows.append(
            (
                "cost",
                f"wall time, {PATH_NAMES[path]}",
                "s",
                "lower",
                lambda r, p=path: _seconds(r.cost(p).wall_seconds) if r.cost(p) else None,
            )
        )
    rows += [
        ("cost", "CPU, everything it runs", "s", "lower", lambda r: _total(r, lambda c: c.cpu_seconds)),
        ("cost", "wall time, everything it runs", "s", "lower", lambda r: _total(r, lambda c: c.wall_seconds)),
        ("cost", "state rows held by the stream, max", "rows", "lower", lambda r: r.state_rows_max),
    ]
    return rows


def compare(report: Report) -> Comparison:
    """The side-by-side table of ``report``, configurations in the report's order."""
    rows = []
    for group, metric, unit, better, value_of in _rows(report.results):
        values = tuple(value_of(r) for r in report.results)
        if all(v is None for v in values):
            continue
        rows.append(ComparisonRow(group, metric, unit, better, values, winners(values, better)))
    return Comparison(report.configurations, tuple(rows))

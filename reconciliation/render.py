"""The lab's text renderer, and the JSON of a ``Reconciliation``: renderers only read results.

``render_text(result)`` is the one function that turns a result into the lines a command
prints. It dispatches on the result's type (``functools.singledispatch``): this module renders a
``Reconciliation``; a module that defines another result registers its rendering next to it
(``lklab.pipelines.billing_windows.summary`` the batch summary, ``lklab.pipelines.unique_visitors.reconcile`` and ``lklab.pipelines.order_payments.reconcile``
the other pipelines' reconciliations) and writes figures with the helpers below, so every
command's text reads the same way: counts and money grouped in thousands and exact (a
``Decimal`` keeps its digits), deltas signed, rates as percentages at four places.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from decimal import Decimal
from functools import singledispatch

from reconciliation.result import Reconciliation
from reconciliation.tables import CORRECTED_AGGREGATES, RECON_CORRECTIONS
from shared.catalog import BATCH_TRUTH

__all__ = ["render_text", "render_json", "as_dict", "grouped", "plain", "signed", "rate"]


def plain(value):
    """``value`` ready for JSON: decimals as exact strings, inside dicts and lists too."""
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value


def as_dict(result: Reconciliation) -> dict:
    """JSON-ready: money and seconds as exact decimal strings, days as ISO dates."""
    out = {
        "run_id": result.run_id,
        "against": result.against,
        "days": result.days.describe(),
        "date_from": None if result.days.everything else result.days.first.isoformat(),
        "date_to": None if result.days.everything else result.days.last.isoformat(),
        "windows": result.windows,
        "tolerance": result.tolerance.describe(),
        "batch_last_segment": result.batch_last_segment,
        "stream_last_segment": result.stream_last_segment,
        "stream_batch": result.stream_batch,
        "stream_versions": dict(result.stream_versions),
        "corrected_equals_truth": result.corrected_equals_truth,
        "unexplained_events": result.unexplained_events,
        "corrections": result.corrections,
        "currencies": [],
        "largest_gaps": [plain(asdict(gap)) for gap in result.largest_gaps],
        "tables": result.tables,
    }
    for c in result.currencies:
        item = plain(asdict(c))
        item.update(
            windows_matched=c.windows_matched,
            exact_match_rate=c.exact_match_rate,
            completeness=c.completeness,
            corrected_equals_truth=c.corrected_equals_truth,
        )
        out["currencies"].append(item)
    return out


def render_json(result: Reconciliation) -> str:
    return json.dumps(as_dict(result), indent=2, sort_keys=False)


def grouped(number: int | Decimal) -> str:
    """``1,234`` and ``123,456.780000``: thousands separated, every digit kept."""
    return f"{number:,}"


def signed(number: int | Decimal) -> str:
    """``+2`` and ``-3.000000``: a delta, with its sign always written."""
    return f"{number:+,}"


def rate(value: float | None) -> str:
    """``97.2447%``; ``n/a`` when there is nothing to divide by."""
    return "n/a" if value is None else f"{value:.4%}"


@singledispatch
def render_text(result: object) -> str:
    """The lines a command prints for ``result``."""
    raise TypeError(f"no text rendering of a {type(result).__name__}: register one with @render_text.register")


@render_text.register
def _render_reconciliation(result: Reconciliation) -> str:
    lines = [
        f"reconciliation {result.run_id}: {result.against} vs {BATCH_TRUTH.name}, {result.days.describe()}, "
        f"{result.windows} windows, tolerance {result.tolerance.describe()}",
        f"  truth read the log up to segment {grouped(result.batch_last_segment)}; the stream up to {grouped(result.stream_last_segment)}"
        + ("" if result.stream_batch is None else f" (as of its micro-batch {grouped(result.stream_batch)})"),
    ]
    if not result.currencies:
        lines.append("  no windows on either side for these days")
    for c in result.currencies:
        statuses = ", ".join(f"{grouped(n)} {s}" for s, n in c.status_counts.items() if n)
        lines += [
            f"  {c.currency}: {grouped(c.windows_compared)} windows ({statuses}); exact-match rate {rate(c.exact_match_rate)}",
            f"    money: truth {grouped(c.truth_amount)} vs stream {grouped(c.stream_amount)} (completeness {rate(c.completeness)}); "
            f"total abs error {grouped(c.total_abs_error)}; max relative error {rate(None if c.max_rel_error is None else float(c.max_rel_error))}",
            f"    side output: {grouped(c.late_events)} late events, {grouped(c.late_amount)}"
            + (
                f"; lateness p50 {c.lateness.p50} s, p99 {c.lateness.p99} s, p99.9 {c.lateness.p99_9} s, max {c.lateness.max} s"
                if c.late_events
                else ""
            ),
        ]
        for e in c.explained:
            lines.append(f"    explained by {e.reason}: {signed(e.events)} events, {signed(e.money)}")
        lines.append(
            f"    unexplained: {grouped(c.unexplained_windows)} windows, {grouped(c.unexplained_events)} events, {grouped(c.unexplained_money)}"
        )
        verdict = (
            "equal the truth"
            if c.corrected_equals_truth
            else (
                f"match the truth in {grouped(c.corrected_windows_matched)} of {grouped(c.corrected_windows_compared)} windows"
            )
        )
        lines.append(f"    stream + side output ({CORRECTED_AGGREGATES.name}) {verdict}")
        for e in c.corrected_explained:
            lines.append(f"      still differing by {e.reason}: {signed(e.events)} events, {signed(e.money)}")
        if c.corrected_unexplained_events or c.corrected_unexplained_money:
            lines.append(
                f"      unexplained: {grouped(c.corrected_unexplained_events)} events, {grouped(c.corrected_unexplained_money)}"
            )
    if result.largest_gaps:
        lines.append("  largest gaps (truth - stream):")
        for g in result.largest_gaps:
            why = ", ".join(f"{e.reason} {signed(e.money)}" for e in g.explained) or "nothing recorded"
            rest = f"; unexplained {signed(g.unexplained_money)}" if g.unexplained_events or g.unexplained_money else ""
            lines.append(
                f"    {g.window_start} {g.account_id} {g.currency} {g.status}: {signed(g.events_delta)} events, "
                f"{signed(g.amount_delta)} ({why}{rest})"
            )
    lines.append(f"  {grouped(result.corrections)} window corrections in {RECON_CORRECTIONS.name}")
    return "\n".join(lines)

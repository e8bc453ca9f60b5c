"""Text and JSON renderings of a ``Reconciliation`` (they only read it)."""

from __future__ import annotations

import json
from dataclasses import asdict
from decimal import Decimal

from reconciliation.result import Reconciliation

__all__ = ["render_text", "render_json", "as_dict"]


def _plain(value):
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
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
        "largest_gaps": [_plain(asdict(gap)) for gap in result.largest_gaps],
        "tables": result.tables,
    }
    for c in result.currencies:
        item = _plain(asdict(c))
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


def _rate(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.4%}"


def render_text(result: Reconciliation) -> str:
    lines = [
        f"reconciliation {result.run_id}: {result.against} vs batch_truth, {result.days.describe()}, "
        f"{result.windows} windows, tolerance {result.tolerance.describe()}",
        f"  truth read the log up to segment {result.batch_last_segment:,}; the stream up to {result.stream_last_segment:,}"
        + ("" if result.stream_batch is None else f" (as of its micro-batch {result.stream_batch:,})"),
    ]
    if not result.currencies:
        lines.append("  no windows on either side for these days")
    for c in result.currencies:
        statuses = ", ".join(f"{n:,} {s}" for s, n in c.status_counts.items() if n)
        lines += [
            f"  {c.currency}: {c.windows_compared:,} windows ({statuses}); exact-match rate {_rate(c.exact_match_rate)}",
            f"    money: truth {c.truth_amount:,} vs stream {c.stream_amount:,} (completeness {_rate(c.completeness)}); "
            f"total abs error {c.total_abs_error:,}; max relative error {_rate(None if c.max_rel_error is None else float(c.max_rel_error))}",
            f"    side output: {c.late_events:,} late events, {c.late_amount:,}"
            + (f"; lateness p50 {c.lateness.p50} s, p99 {c.lateness.p99} s, p99.9 {c.lateness.p99_9} s, max {c.lateness.max} s"
               if c.late_events else ""),
        ]
        for e in c.explained:
            lines.append(f"    explained by {e.reason}: {e.events:+,} events, {e.money:+,}")
        lines.append(
            f"    unexplained: {c.unexplained_windows:,} windows, {c.unexplained_events:,} events, {c.unexplained_money:,}"
        )
        verdict = "equal the truth" if c.corrected_equals_truth else (
            f"match the truth in {c.corrected_windows_matched:,} of {c.corrected_windows_compared:,} windows"
        )
        lines.append(f"    stream + side output (corrected_aggregates) {verdict}")
        for e in c.corrected_explained:
            lines.append(f"      still differing by {e.reason}: {e.events:+,} events, {e.money:+,}")
        if c.corrected_unexplained_events or c.corrected_unexplained_money:
            lines.append(f"      unexplained: {c.corrected_unexplained_events:,} events, {c.corrected_unexplained_money:,}")
    if result.largest_gaps:
        lines.append("  largest gaps (truth - stream):")
        for g in result.largest_gaps:
            why = ", ".join(f"{e.reason} {e.money:+,}" for e in g.explained) or "nothing recorded"
            rest = f"; unexplained {g.unexplained_money:+,}" if g.unexplained_events or g.unexplained_money else ""
            lines.append(
                f"    {g.window_start} {g.account_id} {g.currency} {g.status}: {g.events_delta:+,} events, "
                f"{g.amount_delta:+,} ({why}{rest})"
            )
    lines.append(f"  {result.corrections:,} window corrections in recon_corrections")
    return "\n".join(lines)

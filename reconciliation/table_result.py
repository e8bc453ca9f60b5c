"""What a reconciliation of two tables found (``reconciliation.table_reconcile``), as frozen values,
and its renderings: the text a person reads first and the JSON document.

Deltas are ``stream - truth``, per key and measure, with a null (or a key absent from a side)
counted as zero, so ``delta_total == stream_total - truth_total``. Measures keep their type: a
decimal stays a ``Decimal`` (written as an exact string in JSON), an integer an ``int``. Without
reasons to explain them (``reconciliation.gap_reasons``: a declared pipeline's log, say), every key
that differs is unexplained; with them, the unexplained figures count only the keys no reason
explains, and ``explained_by`` counts per reason the keys it explains (alone or combined).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING

from reconciliation.render import grouped, plain, render_text, signed

if TYPE_CHECKING:  # only annotations: rendering needs neither Spark nor delta-rs
    from reconciliation.foreign_tables import ForeignTable
    from reconciliation.gap_reasons import GapExplanation, KeyVerdict
    from reconciliation.tolerance import Tolerance

__all__ = ["MeasureFigures", "KeyGap", "TableReconciliation", "as_dict", "render_json"]

Number = int | float | Decimal


@dataclass(frozen=True)
class MeasureFigures:
    """One measure over every key: the sides' totals, the deltas' sum, the sum and the largest
    of their absolute values (with the key holding it), and the unexplained part (``sum |delta|``
    over the keys that differ)."""

    measure: str
    truth_total: Number | None
    stream_total: Number | None
    delta_total: Number
    abs_delta_total: Number
    max_abs_delta: Number
    max_abs_delta_key: dict[str, str] | None
    unexplained_abs_delta: Number


@dataclass(frozen=True)
class KeyGap:
    """One key that differs: its status and, per measure, ``(truth, stream, delta)``."""

    key: dict[str, str]
    status: str
    values: dict[str, tuple[Number | None, Number | None, Number]]


@dataclass(frozen=True)
class TableReconciliation:
    """A stream table against a truth table, compared on ``keys`` by ``measures``."""

    run_id: str
    truth: ForeignTable
    stream: ForeignTable
    keys: tuple[str, ...]
    measures: tuple[str, ...]
    tolerance: Tolerance
    truth_rows: int
    stream_rows: int
    statuses: dict[str, int]
    figures: tuple[MeasureFigures, ...]
    largest_gaps: tuple[KeyGap, ...]
    pipeline: str | None
    tables: dict[str, str]
    explanation: GapExplanation | None = None

    @property
    def unexplained_keys(self) -> int:
        if self.explanation is not None:
            return self.explanation.unexplained_keys
        return sum(n for status, n in self.statuses.items() if status != "match")

    def breaches(self, max_unexplained: Decimal) -> list[str]:
        """Why the unexplained gap is too large: per measure, ``sum |delta|`` of the keys that
        differ above ``max_unexplained``; at 0, any key that differs (even by a null against a 0)."""
        found = [
            f"{f.measure}: unexplained sum |delta| {grouped(f.unexplained_abs_delta)} over "
            f"{grouped(self.unexplained_keys)} keys exceeds {max_unexplained}"
            for f in self.figures
            if Decimal(str(f.unexplained_abs_delta)) > max_unexplained
        ]
        if not found and max_unexplained == 0 and self.unexplained_keys:
            found.append(f"{grouped(self.unexplained_keys)} keys differ unexplained")
        return found


def as_dict(result: TableReconciliation) -> dict:
    """The JSON document: decimals as exact strings, keys' values as text."""
    return {
        "run_id": result.run_id,
        "truth_table": result.truth.path,
        "stream_table": result.stream.path,
        "inputs": {"truth": result.truth.fingerprint, "stream": result.stream.fingerprint},
        "keys": list(result.keys),
        "tolerance": {
            "abs_tol": str(result.tolerance.abs_tol),
            "rel_tol": str(result.tolerance.rel_tol),
            "rule": result.tolerance.describe(),
        },
        "rows": {"truth": result.truth_rows, "stream": result.stream_rows},
        "statuses": dict(result.statuses),
        "measures": {
            f.measure: plain(
                {
                    "truth_total": f.truth_total,
                    "stream_total": f.stream_total,
                    "delta_total": f.delta_total,
                    "abs_delta_total": f.abs_delta_total,
                    "max_abs_delta": f.max_abs_delta,
                    "max_abs_delta_key": f.max_abs_delta_key,
                }
            )
            for f in result.figures
        },
        "unexplained": {
            "keys": result.unexplained_keys,
            "measures": {f.measure: plain(f.unexplained_abs_delta) for f in result.figures},
        },
        "pipeline": result.pipeline,
        "explained_by": None if result.explanation is None else dict(result.explanation.explained_by),
        "explanation": None if result.explanation is None else _explanation(result.explanation),
        "largest_gaps": [
            {
                "key": gap.key,
                "status": gap.status,
                "measures": {m: plain({"truth": t, "stream": s, "delta": d}) for m, (t, s, d) in gap.values.items()},
            }
            for gap in result.largest_gaps
        ],
        "tables": result.tables,
    }


def _verdict(verdict: KeyVerdict) -> dict:
    shown = {"key": verdict.key, "status": verdict.status, "delta": plain(verdict.delta)}
    shown["explained_by"] = list(verdict.reasons)
    if verdict.candidates:
        shown["candidates"] = [list(c) for c in verdict.candidates]
    return shown


def _explanation(explanation: GapExplanation) -> dict:
    return {
        "source": explanation.source,
        "explained_keys": explanation.explained_keys,
        "combined_keys": explanation.combined_keys,
        "unexplained_keys": explanation.unexplained_keys,
        "keys": [_verdict(v) for v in explanation.keys],
    }


def render_json(result: TableReconciliation) -> str:
    return json.dumps(as_dict(result), indent=2)


def _key(key: dict[str, str]) -> str:
    return " ".join(f"{k}={v}" for k, v in key.items())


@render_text.register
def _render(result: TableReconciliation) -> str:
    statuses = ", ".join(f"{grouped(n)} {status}" for status, n in result.statuses.items())
    lines = [
        f"table reconciliation {result.run_id}: stream {result.stream.describe()}",
        f"  vs truth {result.truth.describe()}",
        f"  keys {', '.join(result.keys)}; tolerance {result.tolerance.describe()}",
        f"  rows: truth {grouped(result.truth_rows)}, stream {grouped(result.stream_rows)}; "
        f"{grouped(sum(result.statuses.values()))} keys ({statuses})",
        "  per measure (delta = stream - truth):",
    ]
    for f in result.figures:
        largest = f" at {_key(f.max_abs_delta_key)}" if f.max_abs_delta_key and f.max_abs_delta else ""
        lines.append(
            f"    {f.measure}: truth {_total(f.truth_total)} vs stream {_total(f.stream_total)}; "
            f"sum of deltas {signed(f.delta_total)}, sum |delta| {grouped(f.abs_delta_total)}, "
            f"largest |delta| {grouped(f.max_abs_delta)}{largest}"
        )
    if result.largest_gaps:
        lines.append("  largest gaps:")
        for gap in result.largest_gaps:
            deltas = ", ".join(f"{m} {signed(d)}" for m, (_, _, d) in gap.values.items())
            lines.append(f"    {_key(gap.key)} {gap.status}: {deltas}")
    if result.explanation is not None:
        lines += _explained_lines(result.explanation)
    unexplained = ", ".join(f"{f.measure} {grouped(f.unexplained_abs_delta)}" for f in result.figures)
    lines.append(f"  unexplained: {grouped(result.unexplained_keys)} keys; sum |delta| {unexplained}")
    if result.explanation is not None:
        lines += [f"    {_shown(v)}" for v in result.explanation.keys if not v.explained]
    elif result.pipeline:
        lines.append(
            f"  the {result.pipeline} pipeline is not declared: only a declared pipeline's log explains the gaps "
            "of tables the lab did not write; every differing key counts as unexplained"
        )
    lines.append(f"  rows in {', '.join(result.tables)} (run {result.run_id})")
    return "\n".join(lines)


def _shown(verdict: KeyVerdict) -> str:
    deltas = ", ".join(f"{m} {signed(d)}" for m, d in verdict.delta.items())
    why = " + ".join(verdict.reasons)
    if verdict.candidates:
        why = "either " + " or ".join(" + ".join(c) for c in verdict.candidates) + ": ambiguous"
    return f"{_key(verdict.key)} {verdict.status}: {deltas}" + (f" ({why})" if why else "")


def _explained_lines(explanation: GapExplanation) -> list[str]:
    counts = ", ".join(f"{name.replace('_', ' ')} {grouped(n)}" for name, n in explanation.explained_by.items())
    combined = f", {grouped(explanation.combined_keys)} by a combination" if explanation.combined_keys else ""
    return [
        f"  explained by {explanation.describe}:",
        f"    {grouped(explanation.explained_keys)} keys{combined}; keys per reason: {counts}",
        *(f"    {_shown(v)}" for v in explanation.keys if v.explained),
    ]


def _total(value: Number | None) -> str:
    return "null" if value is None else grouped(value)

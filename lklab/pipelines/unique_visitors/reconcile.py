"""Reconcile a ``unique_visitors`` stream (the speed layer's or a replay's) with the batch truth.

Reads the truth's members (``visitors_truth_members``, with the first line of each) and the
batch's later copies, and the stream's served windows, members, late side output, duplicates
and dead letters as they were when its last micro-batch committed its state (the reconcile runner,
``lklab.reconcile_runner``, reads each table as of
that batch: a stream running meanwhile cannot mix two batches into one reading), and hands them
to ``lklab.pipelines.unique_visitors.reconcile_rule.reconcile_distinct``. ``read_through``: the last segment
the stream had read, from its ``visitors_stream_metrics``.

The per-window result (served, corrected, truth, verdict and the reasons of what still differs)
is appended to the stream's ``visitors_corrected`` tagged with a ``run_id`` naming exactly what
was read (the truth's table version and the stream's batch): a rerun over the same inputs
writes nothing new.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from lklab.pipelines.unique_visitors import tables as visitor_tables
from lklab.pipelines.unique_visitors.batch import BATCH_APP
from lklab.pipelines.unique_visitors.reconcile_rule import DistinctReconciliation, reconcile_distinct
from lklab.pipelines.unique_visitors.speed import VISITORS_RULE
from lklab.reconcile_runner import ReconcileRule, Sides, reconcile_stream
from reconciliation.render import render_text
from shared.tables import Tables

__all__ = ["VISITORS_RECONCILE", "VisitorsReconciliation", "reconcile_visitors", "render_text"]


@dataclass(frozen=True)
class VisitorsReconciliation:
    """``result``: the comparison; ``run_id``: what it read; ``written``: False when a run over
    the same inputs had already written its rows."""

    against: str
    run_id: str
    read_through: int
    written: bool
    result: DistinctReconciliation


def _compare(sides: Sides) -> VisitorsReconciliation:
    result = reconcile_distinct(
        sides.stream(visitor_tables.VISITORS_WINDOWS),
        sides.stream(visitor_tables.VISITORS_MEMBERS),
        sides.stream(visitor_tables.VISITORS_LATE_EVENTS),
        sides.truth(visitor_tables.VISITORS_TRUTH_MEMBERS),
        read_through=sides.read_through,
        dead_letters=sides.stream(visitor_tables.VISITORS_DEAD_LETTER),
        stream_duplicates=sides.stream(visitor_tables.VISITORS_DUPLICATES),
        batch_duplicates=sides.truth(visitor_tables.VISITORS_BATCH_DUPLICATES)
        if visitor_tables.VISITORS_BATCH_DUPLICATES.name in sides.truth_versions
        else None,
    )
    truth_version = sides.truth_versions[visitor_tables.VISITORS_TRUTH_MEMBERS.name]
    run_id = f"{sides.against}: truth v{truth_version}, stream batch {sides.batch}"
    written = _record(sides.tables, visitor_tables.VISITORS_CORRECTED.at(sides.prefix), run_id, result)
    return VisitorsReconciliation(sides.against, run_id, sides.read_through, written, result)


def _truth_position(tables: Tables, **_) -> int | None:
    """The last segment the committed truth read (None: no truth yet)."""
    return tables.committed_version(visitor_tables.VISITORS_TRUTH_MEMBERS.name, BATCH_APP)


VISITORS_RECONCILE = ReconcileRule(
    pipeline="unique_visitors",
    stream=VISITORS_RULE,
    stream_tables=visitor_tables.VISITORS_STREAM_TABLES,
    truth_tables=(
        visitor_tables.VISITORS_TRUTH,
        visitor_tables.VISITORS_TRUTH_MEMBERS,
        visitor_tables.VISITORS_BATCH_DUPLICATES,
    ),
    truth_position=_truth_position,
    compare=_compare,
    agreed=("window-kind", "window-size", "window-slide", "session-gap"),
)


def reconcile_visitors(spark, config, *, against: str = "speed") -> VisitorsReconciliation:
    """Reconcile the stream ``against`` (``speed`` | ``kappa:RUN``) with the truth and record it."""
    return reconcile_stream(spark, config, VISITORS_RECONCILE, against)


def _record(tables: Tables, name: str, run_id: str, result: DistinctReconciliation) -> bool:
    """Append the run's rows once: False when ``run_id``'s rows are already there."""
    if tables.exists(name) and pc.any(pc.equal(tables.read_arrow(name)["run_id"], run_id)).as_py():
        return False
    reasons: dict[tuple, set[str]] = {}
    for d in result.differences:
        reasons.setdefault((d.window_start, d.window_end, d.user_id), set()).add(d.reason)
    windows = result.windows
    keys = zip(
        windows["window_start"].cast(pa.int64()).to_pylist(),
        windows["window_end"].cast(pa.int64()).to_pylist(),
        windows["user_id"].to_pylist(),
    )
    rows = windows.append_column(
        "reasons", pa.array([",".join(sorted(reasons.get(k, ()))) or None for k in keys], pa.string())
    )
    rows = rows.append_column("run_id", pa.array([run_id] * rows.num_rows, pa.string()))
    version = tables.version(name) + 1 if tables.exists(name) else 0
    tables.append(
        name, rows.cast(visitor_tables.VISITORS_CORRECTED.schema), app_id="visitors-reconcile", version=version
    )
    return True


@render_text.register
def _render_visitors(reconciled: VisitorsReconciliation) -> str:
    result = reconciled.result
    verdicts = result.verdicts()
    lines = [
        f"unique_visitors: {reconciled.against} against {visitor_tables.VISITORS_TRUTH.name} ({reconciled.run_id}; read through segment {reconciled.read_through})",
        (
            f"{result.windows.num_rows:,} (window, user) rows compared: {verdicts['match']:,} matching, "
            f"{verdicts['late']:,} explained by the late side output, {verdicts['differs']:,} differing"
        ),
    ]
    if result.differences:
        reasons = ", ".join(f"{count:,} {reason}" for reason, count in result.reasons().items())
        lines.append(f"URLs still different: {reasons}")
        lines += [
            f"  {d.reason}: {d.side} {d.user_id} {d.url} (window {d.window_start}..{d.window_end}, line {d.segment}:{d.line_number})"
            for d in result.differences[:10]
        ]
    else:
        lines.append("proven: corrected (served members + late side output) == truth for every window")
    written = "rows written" if reconciled.written else "this run was already recorded, nothing written"
    lines.append(f"{visitor_tables.VISITORS_CORRECTED.name}: {written}")
    return "\n".join(lines)

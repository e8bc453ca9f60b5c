"""Reconcile a ``unique_visitors`` stream (the speed layer's or a replay's) with the batch truth.

Reads the truth's members (``visitors_truth_members``, with the first line of each) and the
batch's later copies, and the stream's served windows, members, late side output, duplicates
and dead letters as they were when its last micro-batch committed its state (each table as of
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
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import SparkSession

from lklab.pipelines.unique_visitors.batch import VISITORS_BATCH_LOCK
from lklab.pipelines.unique_visitors.reconcile_rule import DistinctReconciliation, reconcile_distinct
from lklab.pipelines.unique_visitors.replay import APP_ID as REPLAY_APP
from lklab.pipelines.unique_visitors.speed import APP_ID as SPEED_APP
from lklab.pipelines.unique_visitors.tables import (
    VISITORS_BATCH_DUPLICATES,
    VISITORS_CORRECTED,
    VISITORS_DEAD_LETTER,
    VISITORS_DUPLICATES,
    VISITORS_LATE_EVENTS,
    VISITORS_MEMBERS,
    VISITORS_STATE,
    VISITORS_STREAM_METRICS,
    VISITORS_TRUTH,
    VISITORS_TRUTH_MEMBERS,
    VISITORS_WINDOWS,
)
from reconciliation.render import render_text
from shared.catalog import replay_name, stream_prefix
from shared.config import LabConfig
from shared.locks import hold, writer
from shared.table_settings import agreed
from shared.tables import Tables

__all__ = ["VisitorsReconcileInputError", "VisitorsReconciliation", "reconcile_visitors", "render_text"]

_WINDOW_SETTINGS = ("window-kind", "window-size", "window-slide", "session-gap")


class VisitorsReconcileInputError(ValueError):
    """A table the reconciliation reads is missing; the message names the command that writes it."""


@dataclass(frozen=True)
class VisitorsReconciliation:
    """``result``: the comparison; ``run_id``: what it read; ``written``: False when a run over
    the same inputs had already written its rows."""

    against: str
    run_id: str
    read_through: int
    written: bool
    result: DistinctReconciliation


def _committed_batch(tables: Tables, prefix: str) -> int | None:
    """The last batch committed under ``prefix``: a replay's, or a speed layer's (a live stream
    may run under a run prefix too, as ``lklab compare`` runs it)."""
    name = VISITORS_STATE.at(prefix)
    if replay_name(prefix):
        found = tables.committed_version(name, REPLAY_APP)
        if found is not None:
            return found
    return tables.committed_version(name, SPEED_APP)


def reconcile_visitors(spark: SparkSession, config: LabConfig, *, against: str = "speed") -> VisitorsReconciliation:
    """Reconcile the stream ``against`` (``speed`` | ``kappa:RUN``) with the truth and record it."""
    prefix = stream_prefix(against)
    lake = str(Path(config.lake).resolve())
    with (
        writer(lake, f"visitors-reconcile-{(prefix or 'speed/').replace('/', '.')}"),
        hold(lake, VISITORS_BATCH_LOCK, shared=True, wait=True),
    ):
        return _reconcile(Tables(spark, lake, config.table_engine), against, prefix)


def _reconcile(tables: Tables, against: str, prefix: str) -> VisitorsReconciliation:
    run = replay_name(prefix)
    writers = {
        VISITORS_TRUTH_MEMBERS.name: "batch",
        VISITORS_STATE.at(prefix): f"replay --name {run}" if run else "speed",
    }
    for name, command in writers.items():
        if not tables.exists(name):
            raise VisitorsReconcileInputError(
                f"{name} does not exist: run 'lklab {command} --pipeline unique_visitors' first"
            )
    agreed(
        tables, [VISITORS_TRUTH.name, VISITORS_WINDOWS.at(prefix)], _WINDOW_SETTINGS
    )  # SettingsConflict if they differ
    batch = _committed_batch(tables, prefix)
    stream = {
        table: tables.as_of(table.at(prefix), batch)
        for table in (
            VISITORS_WINDOWS,
            VISITORS_MEMBERS,
            VISITORS_LATE_EVENTS,
            VISITORS_DUPLICATES,
            VISITORS_DEAD_LETTER,
            VISITORS_STREAM_METRICS,
        )
    }
    truth_version = tables.version(VISITORS_TRUTH_MEMBERS.name)
    read_through = int(pc.max(stream[VISITORS_STREAM_METRICS]["last_segment"]).as_py() or 0)
    result = reconcile_distinct(
        stream[VISITORS_WINDOWS],
        stream[VISITORS_MEMBERS],
        stream[VISITORS_LATE_EVENTS],
        tables.read_arrow(VISITORS_TRUTH_MEMBERS.name, truth_version),
        read_through=read_through,
        dead_letters=stream[VISITORS_DEAD_LETTER],
        stream_duplicates=stream[VISITORS_DUPLICATES],
        batch_duplicates=tables.read_arrow(VISITORS_BATCH_DUPLICATES.name)
        if tables.exists(VISITORS_BATCH_DUPLICATES.name)
        else None,
    )
    run_id = f"{against}: truth v{truth_version}, stream batch {batch}"
    return VisitorsReconciliation(
        against, run_id, read_through, _record(tables, VISITORS_CORRECTED.at(prefix), run_id, result), result
    )


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
    tables.append(name, rows.cast(VISITORS_CORRECTED.schema), app_id="visitors-reconcile", version=version)
    return True


@render_text.register
def _render_visitors(reconciled: VisitorsReconciliation) -> str:
    result = reconciled.result
    verdicts = result.verdicts()
    lines = [
        f"unique_visitors: {reconciled.against} against {VISITORS_TRUTH.name} ({reconciled.run_id}; read through segment {reconciled.read_through})",
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
    lines.append(f"{VISITORS_CORRECTED.name}: {written}")
    return "\n".join(lines)

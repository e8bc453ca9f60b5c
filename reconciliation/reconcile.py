"""Billing's reconciliation rule: diff, explain, fold, measure, write, return the result.

``compute`` compares a stream (``speed``: the speed layer's tables; ``kappa:<RUN>``: a Kappa
replay's ``kappa/<RUN>/`` tables) with ``batch_truth`` for the windows starting on ``days``.
The truth side reads up to the log position the batch recorded for those days; the stream side
up to the last segment its micro-batches read. Tables written (Delta, under ``<lake>/tables``):

* ``recon_diffs``: every compared window of the run that differs in either diff or that a
  reason explains (both sides, deltas, status, explanation per reason, unexplained rest),
  tagged with ``run_id``; the windows that match exactly are counted in ``recon_runs``;
* ``recon_runs``: one row per run and currency (append-only history of the figures);
* ``recon_corrections``: the per-window deltas a consumer of the stream must apply;
* ``<stream>/corrected_aggregates``: the stream's windows with the side output folded in
  (the rows of ``days`` are replaced).

With fixed windows, the windows whose truth and stream rows agree (by checksum) and that no late
event or reason touches are counted from the truth's rows alone; the comparison's aggregation
runs on the others (``reconciliation.agreeing``). The figures and rows are the same either way.

``run_id`` is derived from the inputs (days, stream, tolerance, windows and the Delta versions
of every table read), so a rerun on unchanged inputs writes nothing new: the tables stay
identical. Any change of input gives a new run and new history rows.

A live speed layer commits each micro-batch as several Delta commits. The stream's tables are
read at one consistent cut (``shared.stream_cut``): as they stood when its last completed
micro-batch committed, never half of the one being written; the run records that batch and the
versions read. The stream and the truth must have been built with the same windows
(``SettingsConflict``). The locks (one reconciliation of a stream at a time; the truth read
while no recompute rewrites it) and the cut are the reconcile runner's
(``lklab.reconcile_runner``), which runs this rule as billing's
(``lklab.pipelines.billing_windows.reconcile``).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from dataclasses import dataclass
from decimal import Decimal

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from reconciliation.agreeing import split_agreeing
from reconciliation.attribution import (
    REASONS,
    LineRecords,
    disputed_lines,
    explain_both,
)
from reconciliation.diff import compare_windows, side_rows
from reconciliation.fold import corrected_rows, corrections_due, stream_parts, window_corrections
from reconciliation.metrics import currency_figures, diff_rows, explained_windows, join_explanations, largest_gaps
from reconciliation.result import Reconciliation
from reconciliation.tables import CORRECTED_AGGREGATES, RECON_CORRECTIONS, RECON_DIFFS, RECON_RUNS
from reconciliation.tolerance import Tolerance
from shared import catalog
from shared.aggregation import AGGREGATE_COLUMNS, WINDOW_KEY
from shared.batch_runs import recorded_position
from shared.catalog import (
    BATCH_DEAD_LETTER,
    BATCH_DUPLICATES,
    BATCH_TRUTH,
    DEAD_LETTER,
    DUPLICATE_EVENTS,
    LATE_EVENTS,
    REPLAY_RUNS,
    SPEED_AGGREGATES,
    STREAM_METRICS,
    STREAM_STATE,
)
from shared.config import LabConfig
from shared.partitions import DayRange
from shared.session_conf import session_conf
from shared.stream_cut import StreamCut, stream_cut
from shared.table_settings import record, require, window_settings
from shared.tables import Tables
from shared.windows import window_reach

__all__ = ["compute", "commit", "Outputs", "stream_prefix", "truth_position", "ReconcileInputError"]


# With fixed windows the attribution works on the disputed lines only (a few in a hundred of
# the log; sessions read the whole log and keep the defaults), through some twenty joins and
# distincts: planned once, without re-planning each stage at run time (adaptive execution made
# it 24 jobs instead of 8) or compiling code for each of them. Measured on 27,293 disputed
# lines at load 5: about 10 s of CPU with the defaults, about 6.5 s so.
_FEW_ROWS = {"spark.sql.adaptive.enabled": "false", "spark.sql.codegen.wholeStage": "false"}


class ReconcileInputError(ValueError):
    """The inputs needed for the run are missing or inconsistent (the message says which)."""


def stream_prefix(against: str) -> str:
    """``speed`` -> ``""``; ``kappa:<RUN>`` -> ``kappa/<RUN>/`` (``shared.catalog``)."""
    try:
        return catalog.stream_prefix(against)
    except catalog.StreamChoiceError as err:
        raise ReconcileInputError(str(err)) from None


def _frame(tables: Tables, table: catalog.Table, prefix: str = "", cut: StreamCut | None = None) -> DataFrame:
    """``table`` under ``prefix`` (at the cut's version when a cut is given), or no rows."""
    name = table.at(prefix)
    if cut is not None:
        return tables.read(name, cut.versions[name]) if name in cut.versions else table.empty(tables.spark)
    return tables.read(name) if tables.exists(name) else table.empty(tables.spark)


def _truth_days(tables: Tables, days: DayRange) -> DayRange:
    """``days``, or for 'every day' the days ``batch_truth`` holds: from its files' statistics
    when they record them, else from its rows (a Spark job)."""
    if not days.everything:
        return days
    extent = tables.column_range(BATCH_TRUTH.name, "window_start")
    if extent is not None:
        # a time without a zone is UTC, as the session's time zone reads it
        utc = lambda t: t if t.tzinfo is not None else t.replace(tzinfo=dt.UTC)  # noqa: E731
        first, last = (None if t is None else utc(t).astimezone(dt.UTC).date() for t in extent)
    else:
        day = F.to_date("window_start")  # in the session's time zone: UTC
        first, last = tables.read(BATCH_TRUTH.name).agg(F.min(day), F.max(day)).first()
    if first is None:
        raise ReconcileInputError(f"{BATCH_TRUTH.name} is empty: run 'lklab batch' first")
    return DayRange(first, last)


def truth_position(tables: Tables, days: DayRange) -> int:
    """The last segment the batch truth of ``days`` (every day: the days ``batch_truth`` holds)
    read (``ReconcileInputError``: none recorded for them)."""
    days = _truth_days(tables, days)
    batch = recorded_position(tables, days)
    if batch is None:
        raise ReconcileInputError(
            f"no batch truth recorded for {days.describe()}: run 'lklab batch' for those days first"
        )
    return batch


def _positions(tables: Tables, prefix: str, days: DayRange, cut: StreamCut) -> tuple[int, int]:
    batch = truth_position(tables, days)
    metrics = STREAM_METRICS.at(prefix)
    if metrics not in cut.versions:
        source = "lklab speed" if not prefix else f"lklab replay --name {catalog.replay_name(prefix)}"
        raise ReconcileInputError(f"no {metrics} under {tables.root}: run '{source}' first")
    read = [
        s for s in tables.read_arrow(metrics, cut.versions[metrics]).column("last_segment").to_pylist() if s is not None
    ]
    return batch, max(read, default=0)


def _run_id(
    tables: Tables, prefix: str, against: str, days: DayRange, tolerance: Tolerance, windows: str, cut: StreamCut
) -> str:
    versions = {t.name: tables.version(t.name) if tables.exists(t.name) else None for t in catalog.BATCH_TABLES}
    versions.update({t.at(prefix): cut.versions.get(t.at(prefix)) for t in catalog.STREAM_OUTPUTS})
    key = {
        "against": against,
        "days": days.describe(),
        "tolerance": tolerance.describe(),
        "windows": windows,
        "versions": versions,
    }
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]


def _tagged(frame: DataFrame, run_id: str, against: str) -> DataFrame:
    return frame.select(F.lit(run_id).alias("run_id"), F.lit(against).alias("against"), *frame.columns)


def _runs_rows(result: Reconciliation, recorded_at: dt.datetime) -> pa.Table:
    rows = []
    for c in result.currencies:
        row = {
            "run_id": result.run_id,
            "recorded_at": recorded_at,
            "against": result.against,
            "date_from": result.days.first,
            "date_to": result.days.last,
            "windows": result.windows,
            "tolerance": result.tolerance.describe(),
            "batch_last_segment": result.batch_last_segment,
            "stream_last_segment": result.stream_last_segment,
            "stream_batch": result.stream_batch,
            "stream_versions": json.dumps(dict(result.stream_versions), sort_keys=True),
            "currency": c.currency,
            "windows_compared": c.windows_compared,
            "windows_matched": c.windows_matched,
            "exact_match_rate": c.exact_match_rate,
            "truth_amount": c.truth_amount,
            "stream_amount": c.stream_amount,
            "completeness": c.completeness,
            "total_abs_error": c.total_abs_error,
            "max_rel_error": None if c.max_rel_error is None else float(c.max_rel_error),
            "late_events": c.late_events,
            "late_amount": c.late_amount,
            "lateness_p50_seconds": c.lateness.p50,
            "lateness_p99_seconds": c.lateness.p99,
            "lateness_p99_9_seconds": c.lateness.p99_9,
            "lateness_max_seconds": c.lateness.max,
            "unexplained_windows": c.unexplained_windows,
            "unexplained_events": c.unexplained_events,
            "unexplained_amount": c.unexplained_money,
            "corrected_equals_truth": c.corrected_equals_truth,
            "corrected_unexplained_events": c.corrected_unexplained_events,
            "corrected_unexplained_amount": c.corrected_unexplained_money,
        }
        explained = {e.reason: e for e in c.explained}
        for reason in REASONS:
            row[f"explained_{reason}_events"] = explained[reason].events if reason in explained else 0
            row[f"explained_{reason}_amount"] = explained[reason].money if reason in explained else Decimal(0)
        rows.append(row)
    return pa.Table.from_pylist(rows, schema=RECON_RUNS.schema)


@dataclass(frozen=True)
class Outputs:
    """What a run writes beside its ``Reconciliation``: the windows that differ, the corrections
    to apply to the stream's rows, and the stream's windows with the late events folded in."""

    windows: DataFrame
    corrections: DataFrame
    corrected: DataFrame
    scratch: tuple[DataFrame, ...]  # cached frames, released by ``release``

    def release(self) -> None:
        for frame in (self.windows, self.corrections, self.corrected, *self.scratch):
            frame.unpersist()


def compute(
    tables: Tables,
    config: LabConfig,
    prefix: str,
    days: DayRange,
    against: str,
    tolerance: Tolerance,
    gaps_shown: int = 10,
    *,
    cut: StreamCut | None = None,
    split_from_windows: int | None = None,
) -> tuple[Reconciliation, Outputs]:
    """The reconciliation of the stream under ``prefix`` with the truth, and what it would write;
    the stream read at ``cut`` (None: the cut of its last completed micro-batch now). The agreeing
    windows are split off from ``split_from_windows`` windows of truth (None:
    ``agreeing.SPLIT_FROM_WINDOWS``)."""
    spark, lake, spec = tables.spark, str(tables.root.parent), config.window
    require(
        tables,
        [BATCH_TRUTH.name, SPEED_AGGREGATES.at(prefix), CORRECTED_AGGREGATES.at(prefix)],
        window_settings(config),
    )
    if cut is None:
        cut = stream_cut(tables.root, [t.at(prefix) for t in catalog.STREAM_OUTPUTS], STREAM_STATE.at(prefix))
    if prefix and tables.exists(REPLAY_RUNS.name):
        name = catalog.replay_name(prefix)
        runs = [r for r in tables.read_arrow(REPLAY_RUNS.name).to_pylist() if r["name"] == name]
        if runs and runs[-1]["windows"] != spec.describe():
            raise ReconcileInputError(
                f"replay {against} computed {runs[-1]['windows']} windows, the truth uses {spec.describe()}: "
                "reconcile with the same window settings"
            )
    if not tables.exists(BATCH_TRUTH.name):
        raise ReconcileInputError(f"no {BATCH_TRUTH.name} under {tables.root}: run 'lklab batch' first")
    days = _truth_days(tables, days)
    batch_last, stream_last = _positions(tables, prefix, days, cut)
    run_id = _run_id(tables, prefix, against, days, tolerance, spec.describe(), cut)
    scope = days.contains(F.col("window_start"))

    truth = tables.read(BATCH_TRUTH.name).where(scope)
    stream_all = _frame(tables, SPEED_AGGREGATES, prefix, cut).select(*AGGREGATE_COLUMNS)
    late_all = _frame(tables, LATE_EVENTS, prefix, cut).where(F.col("segment") <= stream_last)

    # A recorded event whose time puts it in no window of the days changes no window of theirs:
    # the lines of other days are left where they are (dead letters have no time until parsed).
    near = days.may_hold(F.col("event_time"), window_reach(spec))
    batch_records = LineRecords(
        batch_last, _frame(tables, BATCH_DUPLICATES).where(near), _frame(tables, BATCH_DEAD_LETTER)
    )
    stream_records = LineRecords(
        stream_last,
        _frame(tables, DUPLICATE_EVENTS, prefix, cut).where(near),
        _frame(tables, DEAD_LETTER, prefix, cut),
        late_all.where(near),
        stream_all.select(*WINDOW_KEY),
    )
    # Kept on the executors and cut from the plans built on it: the parser's expressions are
    # not analysed again by every join of the attribution below.
    parsed = disputed_lines(
        spark,
        lake,
        batch_records,
        stream_records,
        spec,
        max_clock_skew=config.max_clock_skew,
        max_line_bytes=config.max_line_bytes,
    ).localCheckpoint(eager=True)
    with session_conf(spark, spec.pick(fixed=_FEW_ROWS, merging={})):  # sessions: the whole log
        # both diffs' explanations, the stream's and the corrected stream's, in one plan
        explanations = explain_both(parsed, batch_records, stream_records, spec, days).localCheckpoint(eager=True)
    # One aggregation compares the truth with the stream and with its corrected form; every
    # output below reads this one cached frame (no other pass over the million-window tables).
    # The reasons' columns are cached as they are joined (null for the windows nothing
    # explains) and filled in as each output reads them.
    parts = [
        side_rows(truth, truth_count="event_count", truth_amount="amount_total"),
        *stream_parts(stream_all, late_all, spec, scope),
    ]
    # Windows that agree and that nothing touches are counted from the truth alone; the
    # aggregation compares the others (fixed windows; sessions: every window).
    touched = [spec.late_windows(late_all.where(scope)), explanations]
    agreeing = (
        split_agreeing(truth, stream_all.where(scope), touched, min_windows=split_from_windows)
        if spec.pick(fixed=True, merging=False)
        else None
    )
    if agreeing:
        parts = [agreeing.disputed(part) for part in parts]
    joined = join_explanations(compare_windows(parts, tolerance), explanations).persist()
    windows = explained_windows(joined)
    late_in_scope = late_all.where(scope).dropDuplicates(["segment", "line_number"])
    figures, corrections_count = currency_figures(
        windows, late_in_scope, corrections_due(), agreeing.truth_totals if agreeing else None
    )

    result = Reconciliation(
        run_id=run_id,
        against=against,
        days=days,
        windows=spec.describe(),
        tolerance=tolerance,
        batch_last_segment=batch_last,
        stream_last_segment=stream_last,
        stream_batch=cut.batch,
        stream_versions=tuple(sorted(cut.versions.items())),
        currencies=tuple(figures),
        largest_gaps=tuple(largest_gaps(windows, gaps_shown)),
        corrections=corrections_count,
        tables={
            RECON_DIFFS.name: str(tables.path(RECON_DIFFS.name)),
            RECON_RUNS.name: str(tables.path(RECON_RUNS.name)),
            RECON_CORRECTIONS.name: str(tables.path(RECON_CORRECTIONS.name)),
            CORRECTED_AGGREGATES.name: str(tables.path(CORRECTED_AGGREGATES.at(prefix))),
        },
    )
    corrected = corrected_rows(windows)
    if agreeing:
        corrected = corrected.unionByName(agreeing.corrected_rows(corrected))
    scratch = (joined, parsed, agreeing.hashes) if agreeing else (joined, parsed)
    outputs = Outputs(diff_rows(windows), window_corrections(windows), corrected, scratch)
    return result, outputs


def commit(tables: Tables, config: LabConfig, prefix: str, result: Reconciliation, outputs: Outputs) -> None:
    """Write a computed run once: its diffs, corrections and history rows, and the stream's
    corrected windows for its days (tagged with the run, so a rerun on the same inputs commits
    nothing)."""
    app = f"recon-{result.run_id}"
    tables.append(RECON_DIFFS.name, _tagged(outputs.windows, result.run_id, result.against), app_id=app, version=1)
    tables.append(
        RECON_CORRECTIONS.name, _tagged(outputs.corrections, result.run_id, result.against), app_id=app, version=1
    )
    corrected = CORRECTED_AGGREGATES.at(prefix)
    tables.overwrite(corrected, outputs.corrected, predicate=result.days.predicate(), app_id=app, version=1)
    record(tables, [corrected], window_settings(config))
    if result.currencies:
        tables.append(RECON_RUNS.name, _runs_rows(result, dt.datetime.now(dt.UTC)), app_id=app, version=1)

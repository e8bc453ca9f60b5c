"""A reconciliation run: read both sides, diff, explain, fold, measure, write, return the result.

``reconcile`` compares a stream (``speed``: the speed layer's tables; ``kappa:<RUN>``: a Kappa
replay's ``kappa/<RUN>/`` tables) with ``batch_truth`` for the windows starting on ``days``.
The truth side reads up to the log position the batch recorded for those days; the stream side
up to the last segment its micro-batches read. Tables written (Delta, under ``<lake>/tables``):

* ``recon_diffs``: every compared window of the run (both sides, deltas, status, explanation
  per reason, unexplained rest), tagged with ``run_id``;
* ``recon_runs``: one row per run and currency (append-only history of the figures);
* ``recon_corrections``: the per-window deltas a consumer of the stream must apply;
* ``<stream>/corrected_aggregates``: the stream's windows with the side output folded in
  (the rows of ``days`` are replaced).

``run_id`` is derived from the inputs (days, stream, tolerance, windows and the Delta versions
of every table read), so a rerun on unchanged inputs writes nothing new: the tables stay
identical. Any change of input gives a new run and new history rows.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from reconciliation.attribution import REASONS, LineRecords, disputed_lines, explain_windows
from reconciliation.diff import diff_windows
from reconciliation.fold import fold_late_events, window_corrections
from reconciliation.metrics import currency_figures, explained_diff, largest_gaps
from reconciliation.result import Reconciliation
from reconciliation.tolerance import Tolerance
from shared.aggregation import WINDOW_KEY
from shared.config import LabConfig
from shared.partitions import DayRange
from shared.tables import Tables
from spark_jobs.batch_job import recorded_position
from spark_jobs.replay_job import replay_prefix

__all__ = ["reconcile", "stream_prefix", "ReconcileInputError"]

STREAM_TABLES = ("speed_aggregates", "late_events", "duplicate_events", "dead_letter", "stream_metrics")
BATCH_TABLES = ("batch_truth", "batch_duplicates", "batch_dead_letter", "batch_runs")
MONEY = pa.decimal128(38, 6)


class ReconcileInputError(ValueError):
    """The inputs needed for the run are missing or inconsistent (the message says which)."""


def stream_prefix(against: str) -> str:
    """``speed`` -> ``""``; ``kappa:<RUN>`` -> ``kappa/<RUN>/``."""
    if against == "speed":
        return ""
    if against.startswith("kappa:"):
        return replay_prefix(against.split(":", 1)[1])
    raise ReconcileInputError(f"--against {against!r}: use 'speed' or 'kappa:<RUN>'")


def _frame(tables: Tables, name: str, empty_schema: str) -> DataFrame:
    if tables.exists(name):
        return tables.read(name)
    return tables.spark.createDataFrame([], empty_schema)


def _truth_days(tables: Tables, days: DayRange) -> DayRange:
    """``days``, or for 'every day' the days ``batch_truth`` holds."""
    if not days.everything:
        return days
    day = F.to_date("window_start")  # in the session's time zone: UTC
    first, last = tables.read("batch_truth").agg(F.min(day), F.max(day)).first()
    if first is None:
        raise ReconcileInputError("batch_truth is empty: run 'lklab batch' first")
    return DayRange(first, last)


def _positions(tables: Tables, prefix: str, days: DayRange) -> tuple[int, int]:
    batch = recorded_position(tables, days)
    if batch is None:
        raise ReconcileInputError(f"no batch truth recorded for {days.describe()}: run 'lklab batch' for those days first")
    metrics = f"{prefix}stream_metrics"
    if not tables.exists(metrics):
        source = "lklab speed" if not prefix else f"lklab replay --name {prefix.split('/')[1]}"
        raise ReconcileInputError(f"no {metrics} under {tables.root}: run '{source}' first")
    read = [s for s in tables.read_arrow(metrics).column("last_segment").to_pylist() if s is not None]
    return batch, max(read, default=0)


def _run_id(tables: Tables, prefix: str, against: str, days: DayRange, tolerance: Tolerance, windows: str) -> str:
    versions = {
        name: tables.version(name) if tables.exists(name) else None
        for name in [*BATCH_TABLES, *(prefix + t for t in STREAM_TABLES)]
    }
    key = {"against": against, "days": days.describe(), "tolerance": tolerance.describe(), "windows": windows, "versions": versions}
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
    types = {
        "recorded_at": pa.timestamp("us", tz="UTC"), "date_from": pa.date32(), "date_to": pa.date32(),
        "exact_match_rate": pa.float64(), "completeness": pa.float64(), "max_rel_error": pa.float64(),
        "lateness_p50_seconds": pa.decimal128(20, 6), "lateness_p99_seconds": pa.decimal128(20, 6),
        "lateness_p99_9_seconds": pa.decimal128(20, 6), "lateness_max_seconds": pa.decimal128(20, 6),
        "corrected_equals_truth": pa.bool_(),
    }
    fields = []
    for name, value in rows[0].items():
        if name in types:
            fields.append(pa.field(name, types[name]))
        elif isinstance(value, Decimal):
            fields.append(pa.field(name, MONEY))
        elif isinstance(value, int):
            fields.append(pa.field(name, pa.int64()))
        else:
            fields.append(pa.field(name, pa.string()))
    return pa.Table.from_pylist(rows, schema=pa.schema(fields))


def reconcile(
    spark: SparkSession,
    config: LabConfig,
    days: DayRange = DayRange(),
    *,
    against: str = "speed",
    tolerance: Tolerance = Tolerance(),
    write: bool = True,
    gaps_shown: int = 10,
) -> Reconciliation:
    """Reconcile ``against`` with the batch truth for ``days`` (see the module docstring).

    No days: every day ``batch_truth`` holds (the result names them).
    """
    lake = str(Path(config.lake).resolve())
    tables = Tables(spark, lake, config.table_engine)
    prefix = stream_prefix(against)
    spec = config.window
    if prefix and tables.exists("replay_runs"):
        runs = [r for r in tables.read_arrow("replay_runs").to_pylist() if f"kappa/{r['name']}/" == prefix]
        if runs and runs[-1]["windows"] != spec.describe():
            raise ReconcileInputError(
                f"replay {against} computed {runs[-1]['windows']} windows, the truth uses {spec.describe()}: "
                "reconcile with the same window settings"
            )
    if not tables.exists("batch_truth"):
        raise ReconcileInputError(f"no batch_truth under {tables.root}: run 'lklab batch' first")
    days = _truth_days(tables, days)
    batch_last, stream_last = _positions(tables, prefix, days)
    run_id = _run_id(tables, prefix, against, days, tolerance, spec.describe())
    scope = days.contains(F.col("window_start"))

    event_schema = (
        "segment long, line_number long, event_id string, account_id string, event_type string, amount decimal(20,6), "
        "currency string, event_time timestamp, ingest_time timestamp"
    )
    dead_schema = "segment long, line_number long, raw_line string, reject_reason string, reject_detail string"
    late_schema = f"{event_schema}, window_start timestamp, window_end timestamp, lateness_seconds decimal(20,6)"
    truth = tables.read("batch_truth").where(scope)
    stream_all = tables.read(f"{prefix}speed_aggregates") if tables.exists(f"{prefix}speed_aggregates") else spark.createDataFrame(
        [], "window_start timestamp, window_end timestamp, account_id string, currency string, event_count long, amount_total decimal(38,6)"
    )
    late_all = _frame(tables, f"{prefix}late_events", late_schema).where(F.col("segment") <= stream_last)
    stream = stream_all.where(scope)

    batch_records = LineRecords(
        batch_last, _frame(tables, "batch_duplicates", event_schema), _frame(tables, "batch_dead_letter", dead_schema)
    )
    stream_records = LineRecords(
        stream_last,
        _frame(tables, f"{prefix}duplicate_events", event_schema),
        _frame(tables, f"{prefix}dead_letter", dead_schema),
        late_all,
        stream_all.select(*WINDOW_KEY),
    )
    parsed = disputed_lines(spark, lake, batch_records, stream_records, spec, max_clock_skew=config.max_clock_skew, max_line_bytes=config.max_line_bytes).persist()
    explanations = explain_windows(parsed, batch_records, stream_records, spec, days)
    windows = explained_diff(diff_windows(truth, stream, tolerance), explanations).persist()
    if spec.kind == "session":
        # A late event can merge sessions across the edge of the days: fold everything, then select.
        corrected = fold_late_events(stream_all, late_all, spec).where(scope).persist()
    else:
        corrected = fold_late_events(stream, late_all.where(scope), spec).persist()
    folded = explain_windows(parsed, batch_records, stream_records, spec, days, fold_late=True)
    corrected_windows = explained_diff(diff_windows(truth, corrected, tolerance), folded)
    late_in_scope = late_all.where(scope).dropDuplicates(["segment", "line_number"])
    corrections = window_corrections(stream, corrected).persist()

    figures = currency_figures(windows, corrected_windows, late_in_scope)
    result = Reconciliation(
        run_id=run_id,
        against=against,
        days=days,
        windows=spec.describe(),
        tolerance=tolerance,
        batch_last_segment=batch_last,
        stream_last_segment=stream_last,
        currencies=tuple(figures),
        largest_gaps=tuple(largest_gaps(windows, gaps_shown)),
        corrections=corrections.count(),
        tables={
            "recon_diffs": str(tables.path("recon_diffs")),
            "recon_runs": str(tables.path("recon_runs")),
            "recon_corrections": str(tables.path("recon_corrections")),
            "corrected_aggregates": str(tables.path(f"{prefix}corrected_aggregates")),
        },
    )
    if write:
        app = f"recon-{run_id}"
        tables.append("recon_diffs", _tagged(windows, run_id, against), app_id=app, version=1)
        tables.append("recon_corrections", _tagged(corrections, run_id, against), app_id=app, version=1)
        tables.overwrite(f"{prefix}corrected_aggregates", corrected, predicate=days.predicate(), app_id=app, version=1)
        if result.currencies:
            tables.append("recon_runs", _runs_rows(result, dt.datetime.now(dt.timezone.utc)), app_id=app, version=1)
    for frame in (parsed, windows, corrected, corrections):
        frame.unpersist()
    return result

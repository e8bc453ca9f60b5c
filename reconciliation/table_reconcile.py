"""Reconcile any two keyed tables: read, check, diff, measure, write the run's rows once.

``compute`` reads the truth and the stream (``reconciliation.foreign_tables``: a Delta table or
Parquet, written by any engine), refuses what cannot be compared, diffs them on ``keys``
(``reconciliation.keyed_diff``: each key ``match``, ``value_mismatch``, ``missing_in_stream`` or
``extra_in_stream``; a key held twice by a side is a ``DuplicateKeys`` error) and measures the
gap per measure (``reconciliation.table_result``). A value mismatch within the ``Tolerance``
counts as a match: for every measure, ``|stream - truth| <= abs_tol + rel_tol * |truth|``.

``commit`` writes the run into the lab's lake:

* ``table_recon_diffs``: one row per key that differs: ``run_id``, ``key`` (JSON object of the
  key columns as text), ``status``, and ``truth``, ``stream``, ``delta`` (JSON objects, measure
  to exact value as text, a null kept);
* ``table_recon_runs``: one row per run, its inputs and figures.

Given ``reasons`` (``reconciliation.gap_reasons``: amounts per key found outside both tables, a
pipeline's log say), every key that differs is judged by them: a key the reasons hold as an instant
is matched as UTC microseconds (refused unless a timestamp with a time zone), any other as its text;
a float measure is refused (it cannot equal an exact amount). The unexplained figures then count
only the keys no reason explains; ``table_recon_diffs`` still holds every key that differs.

``run_id`` is derived from the inputs (both tables' fingerprints: Delta version, or each Parquet
file's size and modification time; keys, measures, tolerances; and, given reasons, their
source: the log's segments and what was read of it). Both appends are tagged ``recon-<run_id>``,
so a rerun on unchanged inputs commits nothing.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import json
from collections.abc import Sequence

import pyarrow as pa
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from reconciliation.foreign_tables import ForeignTable, ForeignTableError, check_sides, read_columns
from reconciliation.gap_reasons import DifferingKey, GapExplanation, GapReasons, explain
from reconciliation.keyed_diff import STATUSES, DuplicateKeys, keyed_diff, refusing_repeated_keys
from reconciliation.table_result import KeyGap, MeasureFigures, TableReconciliation, as_dict
from reconciliation.tables import TABLE_RECON_DIFFS, TABLE_RECON_RUNS
from reconciliation.tolerance import Tolerance
from shared.tables import Tables

__all__ = ["compute", "commit", "run_id", "DIFFS_SCHEMA", "RUNS_SCHEMA"]

_TEXT, _COUNT = pa.string(), pa.int64()
DIFFS_SCHEMA = pa.schema(
    {"run_id": _TEXT, "key": _TEXT, "status": _TEXT, "truth": _TEXT, "stream": _TEXT, "delta": _TEXT}
)
RUNS_SCHEMA = pa.schema(
    {
        "run_id": _TEXT,
        "recorded_at": pa.timestamp("us", tz="UTC"),
        "truth_table": _TEXT,
        "stream_table": _TEXT,
        "inputs": _TEXT,  # JSON: each side's fingerprint
        "keys": _TEXT,  # JSON list
        "tolerance": _TEXT,
        "truth_rows": _COUNT,
        "stream_rows": _COUNT,
        **{status: _COUNT for status in STATUSES},
        "unexplained_keys": _COUNT,
        "measures": _TEXT,  # JSON: per measure, the figures of the JSON document
    }
)


def run_id(
    truth: ForeignTable,
    stream: ForeignTable,
    keys: Sequence[str],
    measures: Sequence[str],
    tolerance: Tolerance,
    explained_with: dict | None = None,
) -> str:
    key = {
        "truth": truth.fingerprint,
        "stream": stream.fingerprint,
        "keys": list(keys),
        "measures": list(measures),
        "tolerance": [str(tolerance.abs_tol), str(tolerance.rel_tol)],
    }
    if explained_with is not None:  # absent otherwise: a run without reasons keeps its id
        key["explained_with"] = explained_with
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]


def _as_json(columns: dict[str, Column]) -> Column:
    return F.to_json(
        F.struct(*[c.cast("string").alias(name) for name, c in columns.items()]), {"ignoreNullFields": "false"}
    )


def _gaps(diff: DataFrame, keys: Sequence[str], measures: Sequence[str]) -> DataFrame:
    """The diff with ``gap_<m>`` (stream - truth, a null as zero), ``_key`` (JSON) and ``_differs``."""
    gaps = {
        f"gap_{m}": F.coalesce(F.col(f"stream_{m}"), F.lit(0)) - F.coalesce(F.col(f"truth_{m}"), F.lit(0))
        for m in measures
    }
    return diff.select(
        "*",
        *[column.alias(name) for name, column in gaps.items()],
        _as_json({k: F.col(k) for k in keys}).alias("_key"),
        (F.col("status") != "match").alias("_differs"),
    )


def _figures(gaps: DataFrame, measures: Sequence[str]) -> tuple[dict[str, int], list[MeasureFigures]]:
    """Every count and total in one pass over the diff."""
    aggregates = [F.count_if(F.col("status") == s) for s in STATUSES]
    for m in measures:
        size = F.abs(F.col(f"gap_{m}"))
        aggregates += [
            F.sum(f"truth_{m}"),
            F.sum(f"stream_{m}"),
            F.coalesce(F.sum(f"gap_{m}"), F.lit(0)),
            F.coalesce(F.sum(size), F.lit(0)),
            F.coalesce(F.max(size), F.lit(0)),
            F.max_by("_key", F.struct(size, F.col("_key"))),  # ties: the greatest key, so reruns agree
            F.coalesce(F.sum(F.when(F.col("_differs"), size)), F.lit(0)),
        ]
    row = list(gaps.agg(*aggregates).first())
    statuses = dict(zip(STATUSES, row[: len(STATUSES)]))
    figures, rest = [], row[len(STATUSES) :]
    for i, m in enumerate(measures):
        truth, stream, delta, size, largest, at, unexplained = rest[7 * i : 7 * i + 7]
        figures.append(
            MeasureFigures(m, truth, stream, delta, size, largest, json.loads(at) if at else None, unexplained)
        )
    return statuses, figures


def _largest_gaps(gaps: DataFrame, measures: Sequence[str], shown: int) -> list[KeyGap]:
    """The keys that differ most: by ``|delta|`` of the first measure, then of the next ..."""
    order = [F.abs(F.col(f"gap_{m}")).desc() for m in measures]
    rows = gaps.where("_differs").orderBy(*order, "_key").limit(shown).collect()
    return [
        KeyGap(
            json.loads(row["_key"]),
            row["status"],
            {m: (row[f"truth_{m}"], row[f"stream_{m}"], row[f"gap_{m}"]) for m in measures},
        )
        for row in rows
    ]


def _matched(column: str, kind: T.DataType, instant: bool) -> Column:
    if not instant:
        return F.col(column).cast("string")
    if not isinstance(kind, T.TimestampType):
        without = " without a time zone" if isinstance(kind, T.TimestampNTZType) else f" but {kind.simpleString()}"
        raise ForeignTableError(
            f"key {column!r} is not a timestamp{without}: it names no instant to match the explaining "
            "reasons' keys with; write it as a timestamp with a zone (UTC)"
        )
    return F.unix_micros(F.col(column))


def _explain(gaps: DataFrame, measures: Sequence[str], reasons: GapReasons) -> GapExplanation:
    """Every differing key judged by ``reasons`` (collected on the driver)."""
    types = {f.name: f.dataType for f in gaps.schema.fields}
    for m in measures:
        for side in ("truth", "stream"):
            if isinstance(types[f"{side}_{m}"], (T.FloatType, T.DoubleType)):
                raise ForeignTableError(
                    f"measure {m!r} is {types[f'{side}_{m}'].simpleString()} in the {side} table: a float cannot "
                    "equal the exact amounts that explain a gap; cast it to a decimal"
                )
    matched = [
        _matched(c, types[c], c in reasons.instants).alias(f"_match_{i}") for i, c in enumerate(reasons.key_columns)
    ]
    rows = gaps.where("_differs").select(*matched, "_key", "status", *[f"gap_{m}" for m in measures]).collect()
    differing = [
        DifferingKey(
            tuple(row[f"_match_{i}"] for i in range(len(matched))),
            json.loads(row["_key"]),
            row["status"],
            {m: row[f"gap_{m}"] for m in measures},
        )
        for row in rows
    ]
    return explain(differing, reasons, measures)


def compute(
    spark: SparkSession,
    truth: ForeignTable,
    stream: ForeignTable,
    keys: Sequence[str],
    measures: Sequence[str],
    tolerance: Tolerance,
    *,
    tables: Tables,
    pipeline: str | None = None,
    reasons: GapReasons | None = None,
    gaps_shown: int = 5,
) -> tuple[TableReconciliation, DataFrame]:
    """The run's result and its ``table_recon_diffs`` rows (``ForeignTableError``: inputs that
    cannot be compared, a duplicated key among them); ``reasons``: what explains a differing key
    (None: nothing does)."""
    columns = [*keys, *measures]
    repeated = sorted({c for c in columns if columns.count(c) > 1})
    if repeated:
        raise ForeignTableError(f"{', '.join(repeated)} given twice: a column is a key or a measure, once")
    names = (f"the truth table {truth.path}", f"the stream table {stream.path}")
    truth_rows = read_columns(spark, truth, columns, "truth")
    stream_rows = read_columns(spark, stream, columns, "stream")
    counts = check_sides(truth_rows, stream_rows, keys, measures, names)
    gaps = _gaps(keyed_diff(truth_rows, stream_rows, keys, measures, tolerance), keys, measures)
    try:
        with refusing_repeated_keys():  # the diff's first action finds a key held twice
            statuses, figures = _figures(gaps, measures)
    except DuplicateKeys as err:
        side = names[0] if str(err).startswith("the truth") else names[1]
        raise ForeignTableError(f"{side}: {err}") from None
    explanation = None if reasons is None else _explain(gaps, measures, reasons)
    if explanation is not None:
        figures = [
            # "0 * figure +": a decimal keeps its column's scale when nothing is left unexplained
            dataclasses.replace(
                f, unexplained_abs_delta=0 * f.unexplained_abs_delta + explanation.unexplained_abs_delta[f.measure]
            )
            for f in figures
        ]
    result = TableReconciliation(
        run_id=run_id(truth, stream, keys, measures, tolerance, None if reasons is None else reasons.source),
        truth=truth,
        stream=stream,
        keys=tuple(keys),
        measures=tuple(measures),
        tolerance=tolerance,
        truth_rows=counts[0],
        stream_rows=counts[1],
        statuses=statuses,
        figures=tuple(figures),
        largest_gaps=tuple(_largest_gaps(gaps, measures, gaps_shown)),
        pipeline=pipeline,
        explanation=explanation,
        tables={t.name: str(tables.path(t.name)) for t in (TABLE_RECON_DIFFS, TABLE_RECON_RUNS)},
    )
    rows = gaps.where("_differs").select(
        F.lit(result.run_id).alias("run_id"),
        F.col("_key").alias("key"),
        "status",
        *[
            _as_json({m: F.col(f"{name}_{m}") for m in measures}).alias(side)
            for name, side in (("truth", "truth"), ("stream", "stream"), ("gap", "delta"))
        ],
    )
    return result, rows


def _run_row(result: TableReconciliation) -> pa.Table:
    document = as_dict(result)
    row = {
        "run_id": result.run_id,
        "recorded_at": dt.datetime.now(dt.UTC),
        "truth_table": result.truth.path,
        "stream_table": result.stream.path,
        "inputs": json.dumps(document["inputs"], sort_keys=True),
        "keys": json.dumps(list(result.keys)),
        "tolerance": result.tolerance.describe(),
        "truth_rows": result.truth_rows,
        "stream_rows": result.stream_rows,
        **result.statuses,
        "unexplained_keys": result.unexplained_keys,
        "measures": json.dumps(document["measures"]),
    }
    return pa.Table.from_pylist([row], schema=RUNS_SCHEMA)


def commit(tables: Tables, result: TableReconciliation, rows: DataFrame) -> bool:
    """Write the run's diff rows, then its run row, once per ``run_id``; False when the run had
    already been written (nothing committed)."""
    app = f"recon-{result.run_id}"
    wrote = tables.append(TABLE_RECON_DIFFS.name, rows, app_id=app, version=1)
    return tables.append(TABLE_RECON_RUNS.name, _run_row(result), app_id=app, version=1) or wrote

"""Reconcile the order-payment join's stream (live or a replay) with its batch truth.

Reads both sides' tables, builds a ``JoinSide`` for each (the truth's position is the version of
its commit, ``lklab.payments_batch``; the stream's is the largest segment its metrics record;
its pending events are the state's held orders and payments), runs ``reconcile_join`` and
writes the finance audit (``payments_audit.csv``: the stream's unpaid orders and late payments)
under ``<lake>/reports/payments-<run>/``. Both sides must have been built with the same
``join-bound``.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import SparkSession

from lklab.order_payment_audit import payments_audit_csv
from lklab.payments_batch import truth_position
from reconciliation.join_reconcile import JoinReconciliation, JoinSide, reconcile_join
from reconciliation.render import render_text
from shared import catalog
from shared.catalog import (
    PAYMENTS_BATCH_DEAD_LETTER,
    PAYMENTS_BATCH_DUPLICATES,
    PAYMENTS_DEAD_LETTER,
    PAYMENTS_DUPLICATES,
    PAYMENTS_LATE_EVENTS,
    PAYMENTS_MATCHED,
    PAYMENTS_METRICS,
    PAYMENTS_ORPHANS,
    PAYMENTS_STATE,
    PAYMENTS_TRUTH_MATCHED,
    PAYMENTS_TRUTH_ORPHANS,
    PAYMENTS_TRUTH_UNPAID,
    PAYMENTS_UNPAID,
    stream_prefix,
)
from shared.config import LabConfig
from shared.join_state import join_state_from_table
from shared.table_settings import agreed
from shared.tables import Tables

__all__ = ["PaymentsInputError", "PaymentsReconciliation", "reconcile_payments", "render_text"]


class PaymentsInputError(RuntimeError):
    """A side's tables are missing (run ``batch`` / ``speed`` / ``replay`` first)."""


@dataclass(frozen=True)
class PaymentsReconciliation:
    """``result`` of the diff; ``audit_csv``: where the finance audit went, with ``audit_rows``
    (unpaid orders + late payments) rows."""

    against: str
    truth_segment: int
    stream_segment: int
    result: JoinReconciliation
    audit_csv: Path
    audit_rows: int


def _read(tables: Tables, table: catalog.Table, prefix: str = "") -> pa.Table:
    name = table.at(prefix)
    if not tables.exists(name):
        raise PaymentsInputError(f"table {name} is missing")
    return tables.read_arrow(name)


def reconcile_payments(spark: SparkSession, config: LabConfig, *, against: str = "speed", run: str | None = None) -> PaymentsReconciliation:
    """Diff ``against`` (``speed`` | ``kappa:RUN``) with the truth and write the audit CSV."""
    prefix = stream_prefix(against)
    tables = Tables(spark, config.lake, config.table_engine)
    truth_segment = truth_position(tables)
    if truth_segment is None:
        raise PaymentsInputError("no batch truth: run 'lklab batch --pipeline order_payments' first")
    if not tables.exists(PAYMENTS_STATE.at(prefix)):
        raise PaymentsInputError(f"no stream under '{against}': run 'lklab speed' or 'lklab replay' with --pipeline order_payments first")
    agreed(tables, [PAYMENTS_TRUTH_MATCHED.name, PAYMENTS_MATCHED.at(prefix)], ["join-bound"])  # SettingsConflict when they differ
    truth = JoinSide(
        truth_segment, _read(tables, PAYMENTS_TRUTH_MATCHED), _read(tables, PAYMENTS_TRUTH_UNPAID), _read(tables, PAYMENTS_TRUTH_ORPHANS),
        _read(tables, PAYMENTS_BATCH_DUPLICATES), _read(tables, PAYMENTS_BATCH_DEAD_LETTER),
    )
    state = join_state_from_table(_read(tables, PAYMENTS_STATE, prefix))
    unpaid, late = _read(tables, PAYMENTS_UNPAID, prefix), _read(tables, PAYMENTS_LATE_EVENTS, prefix)
    stream = JoinSide(
        pc.max(_read(tables, PAYMENTS_METRICS, prefix)["last_segment"]).as_py() or 0,
        _read(tables, PAYMENTS_MATCHED, prefix), unpaid, _read(tables, PAYMENTS_ORPHANS, prefix),
        _read(tables, PAYMENTS_DUPLICATES, prefix), _read(tables, PAYMENTS_DEAD_LETTER, prefix),
        late, pa.concat_tables([state.orders, state.payments]),
    )
    result = reconcile_join(truth, stream)
    by_line = [("segment", "ascending"), ("line_number", "ascending")]
    unpaid, late = unpaid.sort_by(by_line), late.sort_by(by_line)
    run = run or dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    directory = Path(config.lake) / "reports" / f"payments-{run}"
    directory.mkdir(parents=True, exist_ok=True)
    audit = directory / "payments_audit.csv"
    audit.write_text(payments_audit_csv(unpaid, late))
    late_payments = int(pc.sum(pc.equal(late["kind"], "payment")).as_py() or 0)
    return PaymentsReconciliation(against, truth_segment, stream.last_segment, result, audit, unpaid.num_rows + late_payments)


@render_text.register
def _render_payments(found: PaymentsReconciliation) -> str:
    result = found.result
    lines = [f"order_payments: truth (segments 1..{found.truth_segment}) against {found.against} (segments 1..{found.stream_segment})"]
    lines += [f"  {outcome:<8} truth {truth:>8,}  stream {stream:>8,}" for outcome, (truth, stream) in result.counts.items()]
    reasons = ", ".join(f"{reason} {count:,}" for reason, count in result.by_reason.items()) or "none"
    lines.append(f"differences: {len(result.differences):,} ({reasons})")
    lines.append(f"finance audit: {found.audit_rows:,} rows (unpaid orders, late payments) -> {found.audit_csv}")
    return "\n".join(lines)

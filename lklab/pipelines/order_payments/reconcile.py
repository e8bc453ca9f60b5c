"""Reconcile the order-payment join's stream (live or a replay) with its batch truth.

Reads both sides' tables, builds a ``JoinSide`` for each (the truth's position is the version of
its commit, ``lklab.pipelines.order_payments.batch``; the stream's is the largest segment its metrics record;
its pending events are the state's held orders and payments), runs ``reconcile_join`` and
writes the finance audit (``payments_audit.csv``: the stream's unpaid orders and late payments)
under ``<lake>/reports/payments-<run>/``. Both sides must have been built with the same
``join-bound`` and line settings (``max-clock-skew``, ``max-line-bytes``: they decide which
lines are dead letters).

Each side is read as one moment of it. The truth's tables are read while no batch rewrites them
(the batch's lock, shared). A live stream commits a micro-batch table by table, its state last:
its tables are read as they were when the last micro-batch whose state committed had landed
(``Tables.as_of``), so a reconcile running beside the stream never pairs one batch's matches
with the next one's unpaid orders. A replay writes its tables once, under its own lock.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import SparkSession

from lklab.pipelines.order_payments.audit import payments_audit_csv
from lklab.pipelines.order_payments.batch import PAYMENTS_BATCH_LOCK, truth_position
from lklab.pipelines.order_payments.reconcile_rule import JoinReconciliation, JoinSide, reconcile_join
from lklab.pipelines.order_payments.state import join_state_from_table
from lklab.pipelines.order_payments.stream import SPEED_APP
from lklab.pipelines.order_payments.tables import (
    PAYMENTS_BATCH_DEAD_LETTER,
    PAYMENTS_BATCH_DUPLICATES,
    PAYMENTS_DEAD_LETTER,
    PAYMENTS_DUPLICATES,
    PAYMENTS_LATE_EVENTS,
    PAYMENTS_MATCHED,
    PAYMENTS_ORPHANS,
    PAYMENTS_STATE,
    PAYMENTS_STREAM_METRICS,
    PAYMENTS_TRUTH_MATCHED,
    PAYMENTS_TRUTH_ORPHANS,
    PAYMENTS_TRUTH_UNPAID,
    PAYMENTS_UNPAID,
)
from reconciliation.render import render_text
from shared import catalog
from shared.catalog import stream_prefix
from shared.config import LabConfig
from shared.locks import hold, writer
from shared.table_settings import LINE_KEYS, agreed
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


def _read(tables: Tables, table: catalog.Table, prefix: str = "", batch: int | None = None) -> pa.Table:
    """The table; with ``batch``, as it was once the stream's micro-batches up to ``batch`` landed."""
    name = table.at(prefix)
    if not tables.exists(name):
        raise PaymentsInputError(f"table {name} is missing")
    return tables.read_arrow(name) if batch is None else tables.as_of(name, batch)


def reconcile_payments(
    spark: SparkSession, config: LabConfig, *, against: str = "speed", run: str | None = None
) -> PaymentsReconciliation:
    """Diff ``against`` (``speed`` | ``kappa:RUN``) with the truth and write the audit CSV."""
    prefix = stream_prefix(against)
    lake = str(Path(config.lake).resolve())
    with (
        writer(lake, f"payments-reconcile-{(prefix or 'speed/').replace('/', '.')}"),
        hold(lake, PAYMENTS_BATCH_LOCK, shared=True, wait=True),
    ):
        return _reconcile(Tables(spark, lake, config.table_engine), config, against, prefix, run)


def _reconcile(tables: Tables, config: LabConfig, against: str, prefix: str, run: str | None) -> PaymentsReconciliation:
    truth_segment = truth_position(tables)
    if truth_segment is None:
        raise PaymentsInputError("no batch truth: run 'lklab batch --pipeline order_payments' first")
    if not tables.exists(PAYMENTS_STATE.at(prefix)):
        raise PaymentsInputError(
            f"no stream under '{against}': run 'lklab speed' or 'lklab replay' with --pipeline order_payments first"
        )
    # SettingsConflict when they differ: another bound pairs other events, other line settings read another log
    agreed(tables, [PAYMENTS_TRUTH_MATCHED.name, PAYMENTS_MATCHED.at(prefix)], ["join-bound", *LINE_KEYS])
    truth = JoinSide(
        truth_segment,
        _read(tables, PAYMENTS_TRUTH_MATCHED),
        _read(tables, PAYMENTS_TRUTH_UNPAID),
        _read(tables, PAYMENTS_TRUTH_ORPHANS),
        _read(tables, PAYMENTS_BATCH_DUPLICATES),
        _read(tables, PAYMENTS_BATCH_DEAD_LETTER),
    )
    # a live stream's last micro-batch whose state committed (None: a replay's untagged tables)
    batch = tables.committed_version(PAYMENTS_STATE.at(prefix), SPEED_APP)
    side = lambda table: _read(tables, table, prefix, batch)
    state = join_state_from_table(side(PAYMENTS_STATE))
    unpaid, late = side(PAYMENTS_UNPAID), side(PAYMENTS_LATE_EVENTS)
    stream = JoinSide(
        pc.max(side(PAYMENTS_STREAM_METRICS)["last_segment"]).as_py() or 0,
        side(PAYMENTS_MATCHED),
        unpaid,
        side(PAYMENTS_ORPHANS),
        side(PAYMENTS_DUPLICATES),
        side(PAYMENTS_DEAD_LETTER),
        late,
        pa.concat_tables([state.orders, state.payments]),
    )
    result = reconcile_join(truth, stream)
    by_line = [("segment", "ascending"), ("line_number", "ascending")]
    unpaid, late = unpaid.sort_by(by_line), late.sort_by(by_line)
    run = run or dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    directory = Path(config.lake) / "reports" / f"payments-{run}"
    directory.mkdir(parents=True, exist_ok=True)
    audit = directory / "payments_audit.csv"
    audit.write_text(payments_audit_csv(unpaid, late))
    late_payments = int(pc.sum(pc.equal(late["kind"], "payment")).as_py() or 0)
    return PaymentsReconciliation(
        against, truth_segment, stream.last_segment, result, audit, unpaid.num_rows + late_payments
    )


@render_text.register
def _render_payments(found: PaymentsReconciliation) -> str:
    result = found.result
    lines = [
        f"order_payments: truth (segments 1..{found.truth_segment}) against {found.against} (segments 1..{found.stream_segment})"
    ]
    lines += [
        f"  {outcome:<8} truth {truth:>8,}  stream {stream:>8,}" for outcome, (truth, stream) in result.counts.items()
    ]
    reasons = ", ".join(f"{reason} {count:,}" for reason, count in result.by_reason.items()) or "none"
    lines.append(f"differences: {len(result.differences):,} ({reasons})")
    lines.append(f"finance audit: {found.audit_rows:,} rows (unpaid orders, late payments) -> {found.audit_csv}")
    return "\n".join(lines)

"""Reconcile the order-payment join's stream (live or a replay) with its batch truth.

Reads both sides' tables, builds a ``JoinSide`` for each (the truth's position is the version of
its commit, ``lklab.pipelines.order_payments.batch``; the stream's is the largest segment its metrics record;
its pending events are the state's held orders and payments), runs ``reconcile_join`` and
writes the finance audit (``payments_audit.csv``: the stream's unpaid orders and late payments)
under ``<lake>/reports/payments-<run>/``. Both sides must have been built with the same
``join-bound`` and line settings (``max-clock-skew``, ``max-line-bytes``: they decide which
lines are dead letters).

Each side is read as one moment of it, by the reconcile runner (``lklab.reconcile_runner``):
the truth under the batch's lock, the stream at its last micro-batch whose state committed, so
a reconcile running beside the stream never pairs one batch's matches with the next one's
unpaid orders.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from lklab.pipelines.order_payments import tables as payment_tables
from lklab.pipelines.order_payments.audit import payments_audit_csv
from lklab.pipelines.order_payments.batch import truth_position
from lklab.pipelines.order_payments.reconcile_rule import JoinReconciliation, JoinSide, reconcile_join
from lklab.pipelines.order_payments.state import join_state_from_table
from lklab.pipelines.order_payments.stream import PAYMENTS_RULE
from lklab.reconcile_runner import ReconcileRule, Sides, reconcile_stream
from reconciliation.render import render_text
from shared.table_settings import LINE_KEYS

__all__ = ["PAYMENTS_RECONCILE", "PaymentsReconciliation", "reconcile_payments", "render_text"]


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


def _compare(sides: Sides, run: str | None = None) -> PaymentsReconciliation:
    truth = JoinSide(sides.truth_segment, *(sides.truth(table) for table in payment_tables.PAYMENTS_BATCH_TABLES))
    state = join_state_from_table(sides.stream(payment_tables.PAYMENTS_STATE))
    unpaid, late = sides.stream(payment_tables.PAYMENTS_UNPAID), sides.stream(payment_tables.PAYMENTS_LATE_EVENTS)
    stream = JoinSide(
        sides.read_through,
        sides.stream(payment_tables.PAYMENTS_MATCHED),
        unpaid,
        sides.stream(payment_tables.PAYMENTS_ORPHANS),
        sides.stream(payment_tables.PAYMENTS_DUPLICATES),
        sides.stream(payment_tables.PAYMENTS_DEAD_LETTER),
        late,
        pa.concat_tables([state.orders, state.payments]),
    )
    result = reconcile_join(truth, stream)
    by_line = [("segment", "ascending"), ("line_number", "ascending")]
    unpaid, late = unpaid.sort_by(by_line), late.sort_by(by_line)
    run = run or dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    directory = Path(sides.config.lake) / "reports" / f"payments-{run}"
    directory.mkdir(parents=True, exist_ok=True)
    audit = directory / "payments_audit.csv"
    audit.write_text(payments_audit_csv(unpaid, late))
    late_payments = int(pc.sum(pc.equal(late["kind"], "payment")).as_py() or 0)
    return PaymentsReconciliation(
        sides.against, sides.truth_segment, stream.last_segment, result, audit, unpaid.num_rows + late_payments
    )


PAYMENTS_RECONCILE = ReconcileRule(
    pipeline="order_payments",
    stream=PAYMENTS_RULE,
    stream_tables=payment_tables.PAYMENTS_TABLES,
    truth_tables=payment_tables.PAYMENTS_BATCH_TABLES,
    truth_position=lambda tables, **_: truth_position(tables),
    compare=_compare,
    # another bound pairs other events, other line settings read another log
    agreed=("join-bound", *LINE_KEYS),
)


def reconcile_payments(spark, config, *, against: str = "speed", run: str | None = None) -> PaymentsReconciliation:
    """Diff ``against`` (``speed`` | ``kappa:RUN``) with the truth and write the audit CSV
    (under ``<lake>/reports/payments-<run>/``, ``run`` the time by default)."""
    return reconcile_stream(spark, config, PAYMENTS_RECONCILE, against, run=run)


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

"""The finance audit of the order-payment join as CSV: unpaid orders and late payments.

One row per unpaid order (the stream's ``payments_unpaid``: no payment matched it within the
bound, final once the watermark passed its interval) and per late payment (the side output's
payments: the watermark had passed the payment's time when it arrived, so the stream matched it
with nothing, and its order may stand as unpaid). Rows are in the order given: unpaid orders
first, then late payments, each by log line.

Amounts are exact with six decimal places, times ISO-8601 UTC with microseconds, lateness in
exact seconds (empty for an unpaid order). Text from the data (ids, currencies) goes through the
finance audit's formula guard (``lklab.report.audit_csv``), so a spreadsheet shows a cell such
as ``=HYPERLINK(...)`` instead of evaluating it.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from lklab.pipelines.order_payments.parse import PAYMENT
from lklab.report import formats
from lklab.report.audit_csv import _text, _write

__all__ = ["PAYMENTS_AUDIT_COLUMNS", "payments_audit_csv"]

PAYMENTS_AUDIT_COLUMNS = (
    "record",
    "event_id",
    "order_id",
    "currency",
    "amount",
    "event_time",
    "ingest_time",
    "watermark",
    "lateness_seconds",
)


def _rows(table: pa.Table, record: str):
    for row in table.to_pylist():
        lateness = row.get("lateness_seconds")
        yield (
            record,
            _text(row["event_id"]),
            _text(row["order_id"]),
            _text(row["currency"]),
            formats.exact(row["amount"]),
            formats.iso(row["event_time"]),
            formats.iso(row["ingest_time"]) if row["ingest_time"] else "",
            formats.iso(row["watermark"]) if row["watermark"] else "",
            "" if lateness is None else formats.exact(lateness),
        )


def payments_audit_csv(unpaid: pa.Table, late: pa.Table) -> str:
    """``payments_audit.csv`` from the stream's unpaid orders and its late side output (whose
    late orders are left out: they are not finance's question here)."""
    late_payments = late.filter(pc.equal(late["kind"], PAYMENT))
    return _write(PAYMENTS_AUDIT_COLUMNS, [*_rows(unpaid, "unpaid_order"), *_rows(late_payments, "late_payment")])

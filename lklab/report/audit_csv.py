"""The finance audit as CSV: every late billing event, and the totals per account.

Amounts are exact with six decimal places (``-5.000000``), times ISO-8601 UTC with
microseconds, one row per late event and configuration, in the audit's order. The page shows
only the largest events; these files hold all of them.

Text that comes from the data (event and account ids, currencies) is written as text: a cell
that would start with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return gets a leading
``'``, so a spreadsheet shows it instead of evaluating it as a formula. Numbers are the lab's
own formatting and stay numbers.
"""

from __future__ import annotations

import csv
import io

from . import formats
from .audit import FinanceAudit

__all__ = ["AUDIT_COLUMNS", "TOTAL_COLUMNS", "audit_csv", "account_totals_csv"]

AUDIT_COLUMNS = (
    "configuration",
    "event_id",
    "account_id",
    "currency",
    "amount",
    "event_time",
    "ingest_time",
    "lateness_seconds",
    "window_start",
    "window_end",
    "disposition",
)
TOTAL_COLUMNS = ("configuration", "account_id", "currency", "events", "amount", "absorbed", "side_output", "folded_in")


_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def _text(value: str) -> str:
    """A data cell a spreadsheet will show rather than evaluate."""
    return f"'{value}" if value.startswith(_FORMULA_STARTS) else value


def _write(header: tuple[str, ...], rows) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    return buffer.getvalue()


def audit_csv(audit: FinanceAudit) -> str:
    """``late_events_audit.csv``: one row per late billing event and configuration."""
    return _write(
        AUDIT_COLUMNS,
        (
            (
                e.configuration,
                _text(e.event_id),
                _text(e.account_id),
                _text(e.currency),
                formats.exact(e.amount),
                formats.iso(e.event_time),
                formats.iso(e.ingest_time),
                formats.exact(e.lateness_seconds),
                formats.iso(e.window_start),
                formats.iso(e.window_end),
                e.disposition,
            )
            for e in audit.events
        ),
    )


def account_totals_csv(audit: FinanceAudit) -> str:
    """``late_events_by_account.csv``: net late money per configuration, account and currency."""
    return _write(
        TOTAL_COLUMNS,
        (
            (
                t.configuration,
                _text(t.account_id),
                _text(t.currency),
                t.events,
                formats.exact(t.amount),
                formats.exact(t.absorbed),
                formats.exact(t.side_output),
                formats.exact(t.folded_in),
            )
            for t in audit.account_totals()
        ),
    )

"""The comparison report: a frozen model of every figure, and the files rendered from it.

Build a ``Report`` (see ``model``) from the tables the runs wrote, then ``write_report`` puts
``report.html`` (self-contained, opens from disk), ``summary.json`` (every number, exact),
``summary.md`` (a digest) and the finance audit CSVs into one directory, usually
``<lake>/reports/<run>/``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from .arrival import ArrivalDelay, DelayQuantile
from .audit import DISPOSITIONS, FinanceAudit, LateBillingEvent, LateTotal
from .audit_csv import account_totals_csv, audit_csv
from .comparison import Comparison, ComparisonRow, compare
from .gaps import FinalGap, GapHeatMap
from .html import AUDIT_ROWS_SHOWN, render_html
from .markdown import render_markdown
from .model import (
    ARCHITECTURES,
    PATHS,
    Configuration,
    ConfigurationResult,
    EndSummary,
    ErrorPoint,
    LatencySummary,
    LateSummary,
    PathCost,
    ReconciliationSummary,
    Report,
    StreamRun,
)
from .publish import publish
from .summary_json import report_from_json, to_json

__all__ = [
    "ARCHITECTURES",
    "PATHS",
    "DISPOSITIONS",
    "AUDIT_ROWS_SHOWN",
    "Configuration",
    "ConfigurationResult",
    "EndSummary",
    "ErrorPoint",
    "LatencySummary",
    "LateSummary",
    "PathCost",
    "ReconciliationSummary",
    "StreamRun",
    "ArrivalDelay",
    "DelayQuantile",
    "FinalGap",
    "GapHeatMap",
    "LateBillingEvent",
    "LateTotal",
    "FinanceAudit",
    "Report",
    "Comparison",
    "ComparisonRow",
    "compare",
    "ReportFiles",
    "write_report",
    "render_html",
    "render_markdown",
    "to_json",
    "report_from_json",
    "audit_csv",
    "account_totals_csv",
]


@dataclass(frozen=True)
class ReportFiles:
    """Where ``write_report`` put each file."""

    html: Path
    summary_json: Path
    summary_md: Path
    audit_csv: Path
    account_totals_csv: Path


def write_report(report: Report, out_dir: str | os.PathLike, audit_rows_shown: int = AUDIT_ROWS_SHOWN) -> ReportFiles:
    """Render ``report`` into ``out_dir`` (created if missing; existing files replaced)."""
    directory = Path(out_dir)
    directory.mkdir(parents=True, exist_ok=True)
    return ReportFiles(
        audit_csv=publish(directory / "late_events_audit.csv", audit_csv(report.audit)),
        account_totals_csv=publish(directory / "late_events_by_account.csv", account_totals_csv(report.audit)),
        summary_json=publish(directory / "summary.json", to_json(report)),
        summary_md=publish(directory / "summary.md", render_markdown(report)),
        html=publish(directory / "report.html", render_html(report, audit_rows_shown)),
    )

"""An order_payments comparison report built by hand: the figures of the hand-made payment log
of ``test_pipeline_compare.py`` (Lambda and Kappa at W=0s, Kappa at W=10m; join bound 10m), with
costs made up and a source that must be escaped. The figures agree as the model requires:
outputs exact at the end (compared - wrong) = truth outputs (5) - never exactly right.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal as D
from pathlib import Path

from lklab.report.model import Configuration, PathCost
from lklab.report.pipeline_model import (
    AuditFile,
    ErrorCount,
    LatencyFigure,
    LogSummary,
    PipelineReport,
    PipelineResult,
    StreamCheck,
)

BASE = dt.datetime(2026, 1, 5, 10, 0, tzinfo=dt.UTC)
LANDING = dt.datetime(2026, 1, 6, tzinfo=dt.UTC)
ODD_SOURCE = "hand-made <b>&"


def at(minutes: int) -> dt.datetime:
    return BASE + dt.timedelta(minutes=minutes)


def _latency(matched: LatencyFigure) -> dict[str, LatencyFigure]:
    # o3 unpaid from its close (10:40) to @105: 3,900 s; p9 orphan from 10:31 to @105: 4,440 s.
    return {
        "matched": matched,
        "unpaid": LatencyFigure(1, D(3900), D(3900), D(3900), 0),
        "orphan": LatencyFigure(1, D(4440), D(4440), D(4440), 0),
    }


def audit_path(reports: Path, delay: str) -> Path:
    """Where ``lklab.pipelines.order_payments.comparison`` has the reconciliation of plan ``op`` write its audit."""
    return reports / f"payments-op-w{delay}-l0" / "payments_audit.csv"


def sample_pipeline_report(reports: Path | None = None) -> PipelineReport:
    """The report; with ``reports`` (the lake's reports folder), each stream has its audit there:
    W=0s 3 rows (o2 and o3 unpaid, p2 late), W=10m 1 row (o3 unpaid)."""
    lambda_ = PipelineResult(
        Configuration("lambda", "0s", "0"),
        5,
        {},
        {"missed match": 1, "wrongly unpaid": 1},
        (ErrorCount(at(22), 1), ErrorCount(at(40), 2), ErrorCount(LANDING, 0)),
        _latency(LatencyFigure(3, D(240), D(49080), D(49080), 0)),
        {"late payments": 1},
        0,
        1,
        1,
        8,
        4,
        (PathCost("speed", 3.2, 4.4), PathCost("batch", 2.0, 2.5), PathCost("reconciliation", 0.5, 0.7)),
        {"late_payment": 2},
        0,
    )
    kappa = PipelineResult(
        Configuration("kappa", "0s", "0"),
        6,
        {"missed match": 1, "wrongly unpaid": 1},
        None,
        (ErrorCount(at(22), 1), ErrorCount(at(40), 2), ErrorCount(LANDING, 2)),
        _latency(LatencyFigure(3, D(60), D(240), D(240), 1)),
        {"late payments": 1},
        0,
        1,
        1,
        8,
        4,
        (PathCost("streaming", 3.2, 4.4), PathCost("replay", 1.5, 2.0)),
        {"late_payment": 2},
        0,
    )
    kappa_late = PipelineResult(
        Configuration("kappa", "10m", "0"),
        5,
        {},
        None,
        (ErrorCount(at(22), 1), ErrorCount(at(32), 0), ErrorCount(LANDING, 0)),
        _latency(LatencyFigure(3, D(240), D(600), D(600), 0)),
        {},
        0,
        1,
        1,
        10,
        5,
        (PathCost("streaming", 3.6, 4.8), PathCost("replay", 1.5, 2.0)),
        {},
        0,
    )
    audits = (
        {"0s": None, "10m": None}
        if reports is None
        else {"0s": AuditFile(str(audit_path(reports, "0s")), 3), "10m": AuditFile(str(audit_path(reports, "10m")), 1)}
    )
    return PipelineReport(
        pipeline="order_payments",
        run_id="op",
        source=ODD_SOURCE,
        rule="a payment matches an order of its order_id paid within 10m of it",
        due="a pair is due at its payment's time, an unpaid order when its interval closes, an orphan at its time",
        state_unit="state rows (held orders and payments, remembered first copies)",
        generated_at=at(200),
        log=LogSummary(10, 8, 1, 1, 0),
        truth={"matched": 3, "unpaid": 1, "orphan": 1},
        results=(lambda_, kappa, kappa_late),
        streams=(StreamCheck("0s", "0", 1, 7, 6, audits["0s"]), StreamCheck("10m", "0", 1, 7, 5, audits["10m"])),
        state_sizes=(),
        log_end=at(105),
        batch_landing=LANDING,
        end=LANDING,
        error_step="1m",
        cost_scope="driver and local executors",
    )

"""The lab's one text renderer: a result of any kind goes through ``render_text``."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal as D

import pytest

from lklab.pipelines.billing_windows import summary
from lklab.pipelines.billing_windows.summary import BatchSummary
from reconciliation import render
from reconciliation.render import grouped, rate, render_text, signed
from reconciliation.result import Reconciliation
from reconciliation.tolerance import Tolerance
from shared.batch_runs import BatchRun
from shared.partitions import DayRange


def test_one_function_renders_every_result():
    assert summary.render_text is render.render_text
    with pytest.raises(TypeError, match="no text rendering of a dict"):
        render_text({})


def test_the_figures_read_alike():
    assert (grouped(1234567), grouped(D("-12345.678900")), grouped(D("0E-6"))) == (
        "1,234,567",
        "-12,345.678900",
        "0.000000",
    )
    assert (signed(2), signed(0), signed(D("-3.000000"))) == ("+2", "+0", "-3.000000")
    assert (rate(0.972447), rate(None)) == ("97.2447%", "n/a")


def test_a_batch_summary_as_text():
    run = BatchRun(9, 12_345, 12_000, 300, 40, 5, DayRange.of("2026-01-05"), 77, 12.345, 30.06)
    window = {
        "window_start": dt.datetime(2026, 1, 5, 0, 1),
        "window_end": dt.datetime(2026, 1, 5, 0, 2),
        "account_id": "acct-1",
        "currency": "USD",
        "event_count": 1234,
        "amount_total": D("99999.990000"),
    }
    text = render_text(
        BatchSummary(
            run,
            "tumbling 1m",
            {"bad_amount": 30, "unparseable": 10},
            77,
            12,
            {"JPY": D("1234567"), "USD": D("-12345.678900")},
            (window,),
            True,
        )
    )
    assert text.splitlines() == [
        "days: 2026-01-05; log: segments 1..9, 12,345 lines",
        "  = 12,000 events + 300 duplicates + 40 dead letters + 5 heartbeats  [conserved]",
        "    dead letter bad_amount: 30",
        "    dead letter unparseable: 10",
        "windows (tumbling 1m): 77 rows over 12 accounts",
        "  JPY total: 1,234,567",
        "  USD total: -12,345.678900",
        "largest windows by |amount|:",
        "  2026-01-05 00:01:00 .. 00:02:00  acct-1     USD   1,234 events     99,999.990000",
        "cost: 12.3 s wall, 30.1 CPU seconds",
        "equals the generator's ground truth: yes, exactly",
    ]


def test_a_reconciliation_as_text():
    empty = Reconciliation(
        "r-2",
        "kappa:x",
        DayRange(),
        "sliding 1m every 10s",
        Tolerance(D("0.01"), D("0.001")),
        12_345,
        12_346,
        (),
        stream_batch=1_000,
        corrections=1_234_567,
    )
    assert render_text(empty).splitlines() == [
        "reconciliation r-2: kappa:x vs batch_truth, every day, sliding 1m every 10s windows, "
        "tolerance |stream - truth| <= 0.01 + 0.001 * |truth|",
        "  truth read the log up to segment 12,345; the stream up to 12,346 (as of its micro-batch 1,000)",
        "  no windows on either side for these days",
        "  1,234,567 window corrections in recon_corrections",
    ]


def test_the_other_pipelines_reconciliations_as_text(tmp_path):
    """``unique_visitors`` and ``order_payments`` render through the same function."""
    import pyarrow as pa

    from lklab.pipelines.order_payments.reconcile import PaymentsReconciliation
    from lklab.pipelines.order_payments.reconcile_rule import JoinDifference, JoinReconciliation
    from lklab.pipelines.unique_visitors.reconcile import VisitorsReconciliation
    from lklab.pipelines.unique_visitors.reconcile_rule import WINDOWS_SCHEMA, DistinctReconciliation, MemberDifference

    windows = pa.Table.from_pylist(
        [
            {
                "window_start": dt.datetime(2026, 1, 5, tzinfo=dt.UTC),
                "window_end": dt.datetime(2026, 1, 5, 0, 1, tzinfo=dt.UTC),
                "user_id": user,
                "served": served,
                "corrected": corrected,
                "truth": truth,
                "verdict": verdict,
            }
            for user, served, corrected, truth, verdict in (
                ("u1", 2, 2, 2, "match"),
                ("u2", 1, 2, 2, "late"),
                ("u3", 1, 1, 2, "differs"),
            )
        ],
        WINDOWS_SCHEMA,
    )
    missing = MemberDifference(0, 60_000_000, "u3", "/b", "truth_only", "unread", 9, 4)
    visitors = VisitorsReconciliation(
        "speed", "speed: truth v3, stream batch 7", 8, False, DistinctReconciliation(windows, (missing,))
    )
    assert render_text(visitors).splitlines() == [
        "unique_visitors: speed against visitors_truth (speed: truth v3, stream batch 7; read through segment 8)",
        "3 (window, user) rows compared: 1 matching, 1 explained by the late side output, 1 differing",
        "URLs still different: 1 unread",
        "  unread: truth_only u3 /b (window 0..60000000, line 9:4)",
        "visitors_corrected: this run was already recorded, nothing written",
    ]

    late = JoinDifference("matched", "missing_in_stream", (2, 1), (3, 5), "late_payment")
    joined = JoinReconciliation({"matched": (1_200, 1_199), "unpaid": (3, 4)}, (late,))
    payments = PaymentsReconciliation("kappa:p1", 9, 9, joined, tmp_path / "payments_audit.csv", 5)
    assert render_text(payments).splitlines() == [
        "order_payments: truth (segments 1..9) against kappa:p1 (segments 1..9)",
        "  matched  truth    1,200  stream    1,199",
        "  unpaid   truth        3  stream        4",
        "differences: 1 (late_payment 1)",
        f"finance audit: 5 rows (unpaid orders, late payments) -> {tmp_path / 'payments_audit.csv'}",
    ]

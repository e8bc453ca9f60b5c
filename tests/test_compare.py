"""``lklab compare``: the report's figures, recomputed here from the tables the runs wrote."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest

from lklab.experiment import ComparisonPlan, run_comparison
from lklab.generator import GeneratorParams, generate
from lklab.report import report_from_json, write_report
from shared.config import load_config
from shared.tables import Tables

SECOND = 1_000_000


@pytest.fixture(scope="module")
def compared(spark, tmp_path_factory):
    lake = tmp_path_factory.mktemp("compare")
    generate(GeneratorParams(events=400, span=30 * 60 * SECOND, accounts=6, segment_interval=300 * SECOND, duplicate_rate=0.02), lake)
    config = load_config(None, {"lake": str(lake), "table-engine": "deltalake", "dedup-horizon": "30m"}, environ={})
    plan = ComparisonPlan(name="t", watermark_delays=("20s",), allowed_lateness=("10m",))
    stages = []
    report = run_comparison(spark, config, plan, source="billing", progress=stages.append)
    files = write_report(report, lake / "reports" / "t")
    return lake, report, files, stages


def rows(tables, name):
    return tables.read_arrow(name).to_pylist()


def test_configurations_and_progress(compared):
    _, report, _, stages = compared
    assert [r.configuration.key for r in report.results] == ["lambda-w20s-l0", "kappa-w20s-l10m"]
    assert stages[0].startswith("batch recompute") and "[2/2] Kappa W=20s L=10m" in stages[2]
    assert "left" in stages[2], "progress gives an estimate of the time left"


def test_late_figures_match_the_side_output_tables(spark, compared):
    lake, report, _, _ = compared
    tables = Tables(spark, lake, "deltalake")
    for result in report.results:
        c = result.configuration
        name = f"kappa/t-w{c.watermark_delay}-l{c.allowed_lateness}/late_events"
        late = rows(tables, name) if tables.exists(name) else []
        distinct = {(r["segment"], r["line_number"]): r for r in late}
        money = {}
        for r in distinct.values():
            money[r["currency"]] = money.get(r["currency"], Decimal(0)) + abs(r["amount"])
        assert result.late.side_output_events == len(distinct)
        assert dict(result.late.side_output_money) == money
    lam, kap = report.results
    assert lam.late.side_output_events > kap.late.side_output_events, "allowed lateness absorbs late events"
    metrics = rows(tables, "kappa/t-w20s-l10m/stream_metrics")
    assert kap.late.absorbed_events <= sum(r["late_updates"] for r in metrics)
    assert kap.late.absorbed_events > 0


def test_error_costs_state_and_reconciliation_match_the_tables(spark, compared):
    lake, report, _, _ = compared
    tables = Tables(spark, lake, "deltalake")
    truth = {(r["window_start"], r["window_end"], r["account_id"], r["currency"]): (r["event_count"], r["amount_total"]) for r in rows(tables, "batch_truth")}
    lam, kap = report.results
    # Kappa's last point: the final streaming answer against the truth, over the windows ended by then.
    final = {(r["window_start"], r["window_end"], r["account_id"], r["currency"]): (r["event_count"], r["amount_total"]) for r in rows(tables, "kappa/t-w20s-l10m/speed_aggregates")}
    now = kap.error_series[-1].processing_time
    ended = {k for k in truth.keys() | final.keys() if k[1] <= now}
    assert kap.error_series[-1].windows_wrong == sum(1 for k in ended if truth.get(k) != final.get(k))
    assert len(kap.error_series) == len(rows(tables, "kappa/t-w20s-l10m/stream_metrics"))
    # Lambda ends with the nightly batch: nothing wrong.
    assert lam.error_series[-1].windows_wrong == 0 and lam.reconciliation.windows_exact == lam.reconciliation.windows_compared

    replays = {r["name"]: r for r in rows(tables, "replay_runs")}
    assert kap.cost("streaming").cpu_seconds == replays["t-w20s-l10m"]["cpu_seconds"]
    assert lam.cost("speed").wall_seconds == replays["t-w20s-l0"]["wall_seconds"]
    batch = sorted(rows(tables, "batch_runs"), key=lambda r: r["run_number"])[-1]
    assert lam.cost("batch").cpu_seconds == batch["cpu_seconds"]
    assert kap.state_rows_max == max(r["state_rows"] for r in rows(tables, "kappa/t-w20s-l10m/stream_metrics"))

    recon = [r for r in rows(tables, "recon_runs") if r["against"] == "kappa:t-w20s-l10m"]
    assert kap.reconciliation.windows_compared == sum(r["windows_compared"] for r in recon)
    assert kap.reconciliation.windows_exact == sum(r["windows_matched"] for r in recon)
    assert kap.reconciliation.unexplained_windows == 0 == lam.reconciliation.unexplained_windows
    assert dict(kap.reconciliation.truth_money) == {r["currency"]: r["truth_amount"] for r in recon}
    assert report.events == batch["events"]


def test_report_files_and_audit(compared):
    _, report, files, _ = compared
    assert files.html.is_file() and "<svg" in files.html.read_text()
    assert report_from_json(files.summary_json.read_text()) == report
    audit_lines = files.audit_csv.read_text().strip().splitlines()
    assert len(audit_lines) - 1 == len(report.audit.events)
    lam = report.results[0]
    folded = [e for e in report.audit.events if e.configuration == "lambda-w20s-l0"]
    assert {e.disposition for e in folded} == {"folded_in"} and len(folded) >= lam.late.side_output_events

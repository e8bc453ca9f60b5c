"""``lklab compare`` on a declared pipeline (``meter_kwh`` of ``examples/meters``), in process, in
the tests' Spark session: the batch truth, then per stream setting the live stream, its replay
(the same rows) and its reconciliation, measured as Lambda and Kappa on the log's own clock.

The log (``examples/meters``, 20 lines) has two readings late for a 2-minute watermark delay:
``r12`` (10:04, for window 10:00–10:05 of m2/south, received 10:11:05) and ``r17`` (10:06:30,
window 10:05–10:10 of m1/north, received 10:15:10). With no allowed lateness both windows stay
short of their last reading; Lambda's batch fixes them when it lands (the next UTC midnight);
5 minutes of allowed lateness absorbs both, each served right when its reading arrives.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
from decimal import Decimal
from pathlib import Path

import pytest

from lklab.cli import main
from tests.conftest import cli_in_this_process

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "meters"
CONFIG = ["--pipeline", "meter_kwh", "--config", "meters.toml"]


@contextlib.contextmanager
def in_folder(folder: Path):
    saved = {k: os.environ.pop(k) for k in ("LKLAB_PIPELINE", "LKLAB_CONFIG", "LKLAB_LAKE") if k in os.environ}
    here = Path.cwd()
    os.chdir(folder)
    try:
        yield
    finally:
        os.chdir(here)
        os.environ.update(saved)


def lklab(*args: str) -> tuple[int, str]:
    out = io.StringIO()
    with cli_in_this_process(), contextlib.redirect_stdout(out):
        code = main(list(args))
    return code, out.getvalue()


@pytest.fixture(scope="module")
def compared(spark, tmp_path_factory):
    """The example's lines ingested, then ``lklab compare`` with its default sweep, one segment per
    micro-batch: (exit code, what it printed, summary.json's report)."""
    home = tmp_path_factory.mktemp("meters-compare") / "meters"
    shutil.copytree(EXAMPLE, home)
    with in_folder(home):
        files = sorted(str(p.name) for p in home.glob("readings-*.jsonl"))
        assert lklab("ingest", *CONFIG, *files)[0] == 0
        code, printed = lklab("compare", *CONFIG, "--name", "meters", "--segments-per-batch", "1")
    summary = json.loads((home / "meters-lake" / "reports" / "meters" / "summary.json").read_text())
    return code, printed, summary["report"]


def test_the_default_sweep_is_the_declared_delay_without_and_with_a_windows_lateness(compared):
    code, printed, report = compared
    assert code == 0, printed
    assert [r["configuration"]["key"] for r in report["results"]] == ["lambda-w2m-l0", "kappa-w2m-l0", "kappa-w2m-l5m"]
    assert report["rule"] == (
        "declared: the count, the sum of kwh, the sum of pulses per meter, region in tumbling 5m windows "
        "(declared watermark delay 2m)"
    )
    # the log as the batch read it; 7 windows in the truth
    assert report["log"] == {"lines": 20, "events": 17, "duplicates": 1, "dead_letters": 1, "heartbeats": 1}
    assert report["truth"] == {"windows": 7}
    # every stream run live in 4 micro-batches (4 segments, one each) and replayed to the same 7 windows
    assert [(s["allowed_lateness"], s["micro_batches"], s["outputs"]) for s in report["streams"]] == [
        ("0", 4, 7),
        ("5m", 4, 7),
    ]


def test_what_each_architecture_gets_wrong(compared):
    results = {r["configuration"]["key"]: r for r in compared[2]["results"]}
    lam, kappa, late = results["lambda-w2m-l0"], results["kappa-w2m-l0"], results["kappa-w2m-l5m"]
    # r12's and r17's windows: short until the batch lands for Lambda, for good for Kappa without lateness
    assert (lam["wrong_at_end"], lam["wrong_before_batch"]) == ({}, {"undercounted": 2})
    assert kappa["wrong_at_end"] == {"undercounted": 2}
    assert late["wrong_at_end"] == {}
    for result in (lam, kappa):
        assert result["side_output"] == {"late events": 2, "late (event, window) rows": 2}
        assert result["reconciliation"] == {"windows explained by late events": 2}
    assert (late["side_output"], late["absorbed"], late["reconciliation"]) == ({}, 2, {})
    assert {r["unexplained"] for r in results.values()} == {0}
    assert {(r["duplicates"], r["dead_letters"]) for r in results.values()} == {(1, 1)}


def test_latency_from_each_windows_end_until_it_is_right_for_good(compared):
    results = {r["configuration"]["key"]: r["latency"]["windows"] for r in compared[2]["results"]}
    # Lambda: r12's window (due 10:05) right when the batch lands at 2026-01-06T00:00: 50,100 s
    assert results["lambda-w2m-l0"] == {
        "outputs": 7,
        "p50": "0.000000",
        "p95": "50100.000000",
        "max": "50100.000000",
        "never": 0,
    }
    # Kappa without lateness: r18 (received 10:15:20) completes 10:10-10:15 m1/north 20 s after it is due
    assert results["kappa-w2m-l0"] == {
        "outputs": 7,
        "p50": "0.000000",
        "p95": "20.000000",
        "max": "20.000000",
        "never": 2,
    }
    # with 5m: r12's window right at 10:11:05, 365 s after its end; r17's at 10:15:10, 310 s
    assert results["kappa-w2m-l5m"] == {
        "outputs": 7,
        "p50": "0.000000",
        "p95": "365.000000",
        "max": "365.000000",
        "never": 0,
    }


def test_the_error_series_follows_the_log_clock(compared):
    late = next(r for r in compared[2]["results"] if r["configuration"]["key"] == "kappa-w2m-l5m")
    points = [(p["processing_time"][11:19], p["wrong"]) for p in late["error_series"]]
    # 10:05 r12's window due, short; 10:10 r17's too; 10:11:10 r12 arrived (sampled at 10:11:10);
    # 10:15 m1/north's third window due without r18; 10:15:10 r17; 10:15:20 r18: none wrong
    assert points == [
        ("10:00:40", 0),
        ("10:05:00", 1),
        ("10:10:00", 2),
        ("10:11:10", 1),
        ("10:15:00", 2),
        ("10:15:10", 1),
        ("10:15:20", 0),
        ("00:00:00", 0),
    ]


def test_the_state_holds_open_windows_and_remembered_ids(compared):
    results = {r["configuration"]["key"]: r for r in compared[2]["results"]}
    # 17 ids remembered (the dedup horizon outlasts the log) + the windows still open at the end:
    # 3 for W=2m L=0 (10:10-10:15), 5 with 5m of lateness (10:05-10:10 too)
    assert (results["kappa-w2m-l0"]["state_peak"], results["kappa-w2m-l0"]["state_final"]) == (20, 20)
    assert (results["kappa-w2m-l5m"]["state_peak"], results["kappa-w2m-l5m"]["state_final"]) == (22, 22)


def test_the_digest_names_each_verdict(compared):
    printed = compared[1]
    assert "report: meters-lake/reports/meters/report.html" in printed
    assert "Kappa W=2m L=0: 2 of 7 outputs wrong at the end (2 undercounted)" in printed
    assert "Kappa W=2m L=5m: 0 of 7 outputs wrong at the end (none)" in printed


def test_scenario_is_refused_and_the_sweep_flags_only_apply_to_compare(tmp_path, capsys):
    (tmp_path / "meters.toml").write_text((EXAMPLE / "meters.toml").read_text())
    with in_folder(tmp_path):
        assert lklab("compare", *CONFIG, "--scenario", "late-burst")[0] == 2
        assert "meter_kwh is compared on the lake's log as it is: write it first with 'lklab ingest --pipeline " in (
            capsys.readouterr().err
        )
        assert lklab("speed", *CONFIG, "--watermark-delay", "1m", "--available-now")[0] == 2
        err = capsys.readouterr().err
        assert "--watermark-delay does not apply to 'speed' on the meter_kwh pipeline" in err
        assert "('lklab compare' sweeps them)" in err


@pytest.mark.parametrize(
    "served, truth, kind",
    [
        (None, (3, Decimal("1.550"), 13), "missing"),
        ((1, Decimal("0.300"), 3), None, "extra"),
        ((2, Decimal("1.250"), 10), (3, Decimal("1.550"), 13), "undercounted"),
        ((4, Decimal("1.850"), 16), (3, Decimal("1.550"), 13), "overcounted"),
        ((3, Decimal("1.551"), 13), (3, Decimal("1.550"), 13), "sums differ"),
    ],
)
def test_a_wrong_window_is_named_by_what_is_wrong_with_it(served, truth, kind):
    from lklab.pipelines.declared.comparison import wrong_kind

    assert wrong_kind((), served, truth) == kind


def test_compare_on_session_windows_is_refused_before_spark_starts(tmp_path, capsys):
    declaration = (
        (EXAMPLE / "meters.toml")
        .read_text()
        .replace('window-size = "5m"', 'window-kind = "session"\nsession-gap = "5m"')
    )
    (tmp_path / "meters.toml").write_text(declaration)
    (tmp_path / "meters-lake").mkdir()
    with in_folder(tmp_path):
        assert lklab("compare", *CONFIG)[0] == 2
    assert (
        "[pipelines.meter_kwh] window-kind: lklab compare runs tumbling and sliding windows" in capsys.readouterr().err
    )


def test_the_report_holds_the_advisors_curve_with_the_swept_delay_on_it(compared):
    curve = compared[2]["watermark_curve"]
    assert curve["allowed_lateness"] == "0s" and curve["source"].startswith("lklab advise")
    delays = [p["watermark_delay"] for p in curve["points"]]
    assert delays[0] == "0s" and "2m" in delays
    at_2m = next(p for p in curve["points"] if p["watermark_delay"] == "2m")
    kappa = next(r for r in compared[2]["results"] if r["configuration"]["key"] == "kappa-w2m-l0")
    # the curve's point at the swept delay is what that stream wrote: its 2 late (event, window) rows
    assert at_2m["late_events"] == kappa["side_output"]["late (event, window) rows"] == 2
    assert at_2m["late_money"] == {}  # kWh and pulses are measures, not money

"""``lklab advise`` against real replays: each delay's point is what a replay with it writes.

One generated billing log (late arrivals, retries, malformed lines; sliding windows so an event
has two windows), read once by the advisor; three replays with their window history at three
delays. Per delay: the side output's rows and their money per currency, and the report's time
until final and events when final (``measure.latency`` over the replay's window history against
the batch truth) equal the advisor's point.
"""

from __future__ import annotations

import dataclasses
import json
from decimal import Decimal

import pyarrow as pa
import pytest

from lklab.cli import main
from lklab.pipelines import find
from lklab.pipelines.billing_windows import measure
from lklab.pipelines.billing_windows.batch import run_batch
from lklab.pipelines.billing_windows.generator import GeneratorParams, generate
from lklab.pipelines.billing_windows.replay import run_replay
from lklab.watermark_advisor import SECOND, advise
from shared.catalog import BATCH_TRUTH, LATE_EVENTS, WINDOW_HISTORY, replay_prefix
from shared.config import load_config
from shared.tables import Tables

MINUTE = 60 * SECOND
DELAYS = {"5s": 5 * SECOND, "45s": 45 * SECOND, "3m": 3 * MINUTE}
SETTINGS = {
    "table-engine": "deltalake",
    "window-kind": "sliding",
    "window-size": "2m",
    "window-slide": "1m",
    "allowed-lateness": "30s",
    "dedup-horizon": "6h",
}


@pytest.fixture(scope="module")
def lake(spark, tmp_path_factory):
    where = tmp_path_factory.mktemp("advise")
    generate(GeneratorParams(events=1500, span=40 * MINUTE, accounts=5, segment_interval=2 * MINUTE), where)
    config = load_config(None, {"lake": str(where), **SETTINGS}, environ={})
    run_batch(spark, config, refresh=True)
    log = find("billing_windows").advise.read(spark, config, None, lambda _: None)
    return where, config, advise(log, DELAYS)


def _late_money(late: pa.Table) -> dict[str, Decimal]:
    money: dict[str, Decimal] = {}
    for currency, amount in zip(late["currency"].to_pylist(), late["amount"].to_pylist()):
        money[currency] = money.get(currency, Decimal(0)) + amount
    return {c: m for c, m in money.items() if m}


@pytest.mark.parametrize("delay", DELAYS)
def test_each_point_is_what_a_replay_with_that_delay_writes(spark, lake, delay):
    where, config, advice = lake
    point = advice.points[delay]
    name = f"advise-{delay}"
    run_replay(spark, dataclasses.replace(config, watermark_delay=DELAYS[delay]), name, replace=True, history=True)
    tables = Tables(spark, where, "deltalake")
    prefix = replay_prefix(name)
    late = tables.read_arrow(LATE_EVENTS.at(prefix)) if tables.exists(LATE_EVENTS.at(prefix)) else None
    assert point.exact
    assert point.late_events == (0 if late is None else late.num_rows)
    assert dict(point.late_money) == ({} if late is None else _late_money(late))
    truth = measure.rows_of(tables.read_arrow(BATCH_TRUTH.name))
    served = measure.served_from_history(tables.read_arrow(WINDOW_HISTORY.at(prefix)))
    figures = measure.latency(served, truth)
    assert (point.windows, point.truth_events) == (figures.windows, figures.truth_events)
    assert (point.never_final, point.events_when_final) == (figures.never_final, figures.events_when_final)
    assert (point.final_p50, point.final_p95, point.final_max) == (
        figures.final_p50,
        figures.final_p95,
        figures.final_max,
    )


def test_the_delays_asked_are_on_the_curve_and_something_is_late_at_the_smallest(lake):
    _, _, advice = lake
    on_curve = {p.watermark_delay: p for p in advice.curve}
    assert all(on_curve[DELAYS[name]] == point for name, point in advice.points.items())
    assert advice.points["5s"].late_events > advice.points["3m"].late_events


def test_the_command_writes_the_points_by_their_names_and_the_plot(lake, tmp_path, capsys):
    where, _, advice = lake
    out = tmp_path / "advice.json"
    argv = ["advise", "--lake", str(where), "--watermark-delay", "5s,45s", "--target-completeness", "99%"]
    settings = [f"--{k}={v}" for k, v in SETTINGS.items() if k != "table-engine"]
    assert main([*argv, *settings, "--json-out", str(out)]) == 0
    document = json.loads(out.read_text())
    assert list(document["points"]) == ["5s", "45s"]
    assert document["points"]["5s"]["late_events"] == advice.points["5s"].late_events
    assert document["points"]["45s"]["late_money"] == {
        c: f"{m:f}" for c, m in sorted(advice.points["45s"].late_money.items())
    }
    assert document["curve"] and document["recommended"]["target_completeness"] == "0.990000"
    assert out.with_suffix(".png").stat().st_size > 0
    assert "recommended: watermark delay" in capsys.readouterr().out


def test_a_pipeline_without_windows_is_refused_naming_those_with_them(tmp_path, capsys):
    assert main(["advise", "--pipeline", "running_max", "--lake", str(tmp_path)]) == 2
    assert "valid: billing_windows" in capsys.readouterr().err


def test_sessions_are_refused_before_spark_starts(tmp_path, capsys):
    assert main(["advise", "--lake", str(tmp_path), "--window-kind", "session"]) == 2
    assert "sessions merge line by line" in capsys.readouterr().err

"""Kappa replay: the streaming job over the whole log into tables of its own, with its cost."""

from __future__ import annotations

from decimal import Decimal

import pytest

from lklab.pipelines.billing_windows.batch import run_batch
from lklab.pipelines.billing_windows.reconcile import reconcile
from lklab.pipelines.billing_windows.replay import ReplayExists, run_replay
from shared.catalog import replay_prefix
from shared.config import load_config
from shared.tables import Tables
from tests.test_reconciliation import DAY, SETTINGS, write_log


def test_replay_writes_its_own_tables_records_cost_and_reconciles(spark, tmp_path):
    write_log(tmp_path)
    settings = {**SETTINGS, "allowed-lateness": "1h", "dedup-horizon": "1h"}
    config = load_config(None, {"lake": str(tmp_path), "table-engine": "deltalake", **settings}, environ={})
    tables = Tables(spark, tmp_path, "deltalake")

    run = run_replay(spark, config, "lateness-1h")
    assert (run.name, run.segments, run.micro_batches, run.lines) == ("lateness-1h", 9, 9, 9)
    assert run.wall_seconds > 0 and run.cpu_seconds > 0
    assert not tables.exists("speed_aggregates"), "a replay never writes the speed layer's tables"
    assert tables.exists("kappa/lateness-1h/speed_aggregates") and tables.exists("kappa/lateness-1h/stream_metrics")
    # With an hour of allowed lateness and dedup memory every event is absorbed: no side output.
    assert (
        not tables.exists("kappa/lateness-1h/late_events")
        or tables.read_arrow("kappa/lateness-1h/late_events").num_rows == 0
    )

    with pytest.raises(ReplayExists, match="pass --replace"):
        run_replay(spark, config, "lateness-1h")
    run_replay(spark, config, "lateness-1h", replace=True)
    history = tables.read_arrow("replay_runs").to_pylist()
    assert [(r["name"], r["allowed_lateness"], r["micro_batches"]) for r in history] == [("lateness-1h", "1h", 9)] * 2

    run_batch(spark, config, DAY)
    result = reconcile(spark, config, DAY, against="kappa:lateness-1h")
    (usd,) = result.currencies
    assert (usd.unexplained_events, usd.unexplained_money) == (0, Decimal(0))
    # The replay read segment 9 (g), the batch ran over every segment too: nothing differs.
    assert usd.status_counts["match"] == usd.windows_compared == 5
    assert result.corrected_equals_truth


def test_replay_names_are_checked():
    assert replay_prefix("run-1.a") == "kappa/run-1.a/"
    with pytest.raises(ValueError, match="replay name '../x'"):
        replay_prefix("../x")

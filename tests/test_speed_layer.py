"""The speed layer on generated scenarios: conservation, and speed + side output == batch truth."""

from collections import defaultdict
from decimal import Decimal

import pytest

from lklab.pipelines.billing_windows.generator import GeneratorParams, generate
from lklab.pipelines.billing_windows.speed import run_speed
from lklab.pipelines.billing_windows.truth import truth_windows
from shared.config import LabConfig
from shared.tables import Tables


def window_key(row):
    return (row["window_start"], row["window_end"], row["account_id"], row["currency"])


def test_conservation_and_speed_plus_late_equals_truth(spark, tmp_path):
    params = GeneratorParams(
        scenario="billing",
        events=3_000,
        accounts=6,
        duplicate_rate=0.02,
        malformed_rate=0.01,
        segment_interval=3_600_000_000,
    )
    generated = generate(params, tmp_path)
    config = LabConfig(
        lake=tmp_path, table_engine="deltalake", watermark_delay=60_000_000, dedup_horizon=12 * 3_600_000_000
    )
    run_speed(spark, config, available_now=True)
    tables = Tables(spark, tmp_path, "deltalake")
    manifest = generated.manifest

    metrics = tables.read_arrow("stream_metrics").to_pylist()
    assert len(metrics) == manifest["segments"]
    for row in metrics:  # per batch: every line in exactly one place
        assert row["input_lines"] == row["on_time"] + row["late"] + row["duplicates"] + row["dead_letters"]
    total = lambda column: sum(row[column] for row in metrics)
    assert total("input_lines") == manifest["lines"]
    assert total("duplicates") == manifest["duplicates"]  # retries land within the horizon
    assert total("dead_letters") == sum(manifest["dead_letters"].values())
    assert total("late") == tables.read_arrow("late_events").num_rows > 0

    money = defaultdict(Decimal)  # money: on time + late == every real event's amount
    for row in metrics:
        for column in ("on_time_amounts", "late_amounts"):
            for currency, amount in row[column]:
                money[currency] += amount
    assert dict(money) == {c: Decimal(v) for c, v in manifest["money_by_currency"].items()}

    # once every window is final (watermark past the last one), speed + late side output == truth
    final_by_end = tables.read_arrow("speed_aggregates").to_pylist()
    combined = defaultdict(lambda: [0, Decimal(0)])
    for row in final_by_end:
        combined[window_key(row)][0] += row["event_count"]
        combined[window_key(row)][1] += row["amount_total"]
    for row in tables.read_arrow("late_events").to_pylist():
        combined[window_key(row)][0] += 1
        combined[window_key(row)][1] += row["amount"]
    truth = {
        window_key(r): [r["event_count"], r["amount_total"]]
        for r in truth_windows(generated.events, config.window).to_pylist()
    }
    assert dict(combined) == truth
    watermark = max(row["next_watermark"] for row in metrics)
    assert {r["status"] for r in final_by_end if r["window_end"] <= watermark} == {"final"}
    assert {r["status"] for r in final_by_end if r["window_end"] > watermark} <= {"open"}


@pytest.fixture(scope="module")
def ran(spark, tmp_path_factory):
    """A small generated lake (two segments) after the speed layer read all of it."""
    lake = tmp_path_factory.mktemp("ran")
    generate(GeneratorParams(events=500, segment_interval=3 * 3_600_000_000), lake)
    run_speed(spark, LabConfig(lake=lake, table_engine="deltalake"), available_now=True)
    return lake


def test_a_second_run_over_the_same_log_commits_nothing(spark, ran):
    config = LabConfig(lake=ran, table_engine="deltalake")
    tables = Tables(spark, ran, "deltalake")
    versions = {name: tables.version(name) for name in ("speed_aggregates", "stream_metrics", "stream_state")}
    run_speed(spark, config, available_now=True)
    assert {name: tables.version(name) for name in versions} == versions


def test_missing_checkpoint_with_existing_tables_is_refused(spark, ran, tmp_path):
    """On a copy of a lake the speed layer wrote (its log and tables) without the checkpoint."""
    import shutil

    lake = tmp_path / "lake"
    shutil.copytree(ran, lake, ignore=shutil.ignore_patterns("checkpoints"))
    config = LabConfig(lake=lake, table_engine="deltalake")
    with pytest.raises(RuntimeError, match="checkpoint .* is missing"):
        run_speed(spark, config, available_now=True)

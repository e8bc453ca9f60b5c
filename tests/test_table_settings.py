"""Settings belong to the tables: a stream or a batch refuses to add rows built with other
settings (the command exits 2), and reconcile, replay and compare use the windows the tables were
built with unless told otherwise (and then refuse a contradiction, naming both values)."""

from __future__ import annotations

import os

import pytest

from lklab.cli import main as lklab_main
from lklab.cli.compare import compare_config
from lklab.cli.parser import build_parser
from lklab.pipelines.billing_windows.batch import run_batch
from lklab.pipelines.billing_windows.generator import GeneratorParams, generate
from lklab.pipelines.billing_windows.speed import run_speed
from shared.config import load_config
from shared.table_settings import SettingsConflict, recorded
from shared.tables import Tables
from tests.conftest import cli_in_this_process

HOUR = 3_600_000_000


def config(lake, **settings):
    return load_config(None, {"lake": str(lake), "table-engine": "deltalake", **settings}, environ={})


@pytest.fixture
def lklab_here(spark, monkeypatch, capsys):
    """``lklab ARGS`` on ``lake`` called in this process (``lklab.cli.main``), in the tests' Spark
    session instead of a JVM of its own, with ``LKLAB_LAKE`` and ``LKLAB_TABLE_ENGINE=deltalake``
    (no other ``LKLAB_`` setting): ``(exit code, stdout, stderr)``."""

    def call(lake, *args: str) -> tuple[int, str, str]:
        for name in [name for name in os.environ if name.startswith("LKLAB_")]:
            monkeypatch.delenv(name)
        monkeypatch.setenv("LKLAB_LAKE", str(lake))
        monkeypatch.setenv("LKLAB_TABLE_ENGINE", "deltalake")
        capsys.readouterr()
        with cli_in_this_process():
            code = lklab_main(list(args))
        out, err = capsys.readouterr()
        return code, out, err

    return call


@pytest.fixture(scope="module")
def lake(spark, tmp_path_factory):
    """A speed layer and a batch recompute built with 2-minute windows."""
    path = tmp_path_factory.mktemp("two-minute-lake")
    generate(GeneratorParams(events=600, accounts=3, span=2 * HOUR, segment_interval=HOUR), path)
    run_speed(spark, config(path, **{"window-size": "2m"}), available_now=True)
    run_batch(spark, config(path, **{"window-size": "2m"}))
    return path


LINE_SETTINGS = {"max-clock-skew": "5m", "max-line-bytes": "1048576"}


def test_the_stream_and_the_batch_record_their_settings(spark, lake):
    tables = Tables(spark, lake, "deltalake")
    for name in (
        "speed_aggregates",
        "late_events",
        "duplicate_events",
        "dead_letter",
        "stream_metrics",
        "stream_state",
    ):
        assert recorded(tables, name) == {
            "window-kind": "tumbling",
            "window-size": "2m",
            "watermark-delay": "1m",
            "watermark-interval": "1s",
            "allowed-lateness": "0s",
            "dedup-horizon": "1h",
            **LINE_SETTINGS,
        }, name
    assert recorded(tables, "batch_truth") == {"window-kind": "tumbling", "window-size": "2m", **LINE_SETTINGS}


def test_a_stream_with_other_settings_is_refused(spark, lake):
    with pytest.raises(SettingsConflict, match=r"window-size 2m \(table\) against 1m \(this run\)"):
        run_speed(spark, config(lake), available_now=True)
    with pytest.raises(SettingsConflict, match=r"max-clock-skew 5m \(table\) against 1m \(this run\)"):
        run_speed(spark, config(lake, **{"window-size": "2m", "max-clock-skew": "1m"}), available_now=True)


@pytest.mark.parametrize("command", [["batch"], ["speed", "--available-now"]])
def test_a_run_that_would_dead_letter_other_lines_is_refused_with_exit_2(lake, command, lklab_here):
    code, _, err = lklab_here(lake, *command, "--window-size", "2m", "--max-clock-skew", "1m")
    assert code == 2
    table = "batch_truth" if command == ["batch"] else "dead_letter"  # the stream checks its tables in order
    assert (
        f"lklab {command[0]}: table {table} was built with other settings: max-clock-skew 5m (table) against 1m (this run). "
        "Run with the table's settings, or write to another lake or run name\n"
    ) in err


def test_reconcile_uses_the_tables_windows_and_refuses_a_contradicting_flag(lake, lklab_here):
    code, out, err = lklab_here(lake, "reconcile", "--json")
    assert code == 0, err[-3000:]
    assert '"windows": "tumbling 2m"' in out
    code, _, err = lklab_here(lake, "reconcile", "--window-size", "1m")
    assert code == 2
    assert "--window-size 1m given, the speed layer holds 2m" in err


def test_replay_uses_the_tables_windows_and_refuses_a_contradicting_flag(lake, lklab_here):
    code, _, err = lklab_here(lake, "replay", "--name", "one-minute", "--window-size", "1m")
    assert code == 2
    assert err.endswith(
        "lklab replay: settings contradict the tables: --window-size 1m given, the lake's tables (a replay is compared with "
        "them) holds 2m. Drop the flag to use the tables' settings\n"
    ), err
    assert not (lake / "tables" / "kappa" / "one-minute").exists()
    code, _, err = lklab_here(lake, "replay", "--name", "adopted")
    assert code == 0, err[-3000:]
    tables = Tables(None, lake, "deltalake")
    assert recorded(tables, "kappa/adopted/speed_aggregates") == recorded(tables, "speed_aggregates")
    assert [row["windows"] for row in tables.read_arrow("replay_runs").to_pylist() if row["name"] == "adopted"] == [
        "tumbling 2m"
    ]
    # the speed layer's rules with the speed layer's settings: the same windows, row for row
    rows = lambda name: sorted(tables.read_arrow(name).to_pylist(), key=lambda row: [str(v) for v in row.values()])
    assert rows("kappa/adopted/speed_aggregates") == rows("speed_aggregates")


def test_compare_on_the_lakes_log_uses_the_tables_windows_and_refuses_a_contradicting_flag(lake, lklab_here):
    code, _, err = lklab_here(lake, "compare", "--window-size", "1m")
    assert code == 2
    assert err.endswith(
        "lklab compare: settings contradict the tables: --window-size 1m given, the lake's tables (a comparison recomputes "
        "its batch truth) holds 2m. Drop the flag to use the tables' settings\n"
    ), err
    parse = build_parser().parse_args
    assert compare_config(parse(["compare", "--lake", str(lake)])).window.describe() == "tumbling 2m"
    # --scenario generates the lake anew: the flags alone count
    assert (
        compare_config(parse(["compare", "--lake", str(lake), "--scenario", "billing"])).window.describe()
        == "tumbling 1m"
    )

"""Settings belong to the tables: a stream refuses to add rows built with other settings, and
reconcile uses the windows the tables were built with unless told otherwise (and then refuses
a contradiction, naming both values)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from lklab.batch_recompute import run_batch
from lklab.generator import GeneratorParams, generate
from lklab.speed_layer import run_speed
from shared.config import load_config
from shared.table_settings import SettingsConflict, recorded
from shared.tables import Tables

LKLAB = str(Path(sys.executable).parent / "lklab")
HOUR = 3_600_000_000


def config(lake, **settings):
    return load_config(None, {"lake": str(lake), "table-engine": "deltalake", **settings}, environ={})


@pytest.fixture(scope="module")
def lake(spark, tmp_path_factory):
    """A speed layer and a batch recompute built with 2-minute windows."""
    path = tmp_path_factory.mktemp("two-minute-lake")
    generate(GeneratorParams(events=600, accounts=3, span=2 * HOUR, segment_interval=HOUR), path)
    run_speed(spark, config(path, **{"window-size": "2m"}), available_now=True)
    run_batch(spark, config(path, **{"window-size": "2m"}))
    return path


def test_the_stream_records_its_settings_on_every_table(spark, lake):
    tables = Tables(spark, lake, "deltalake")
    for name in ("speed_aggregates", "late_events", "duplicate_events", "dead_letter", "stream_metrics", "stream_state"):
        assert recorded(tables, name) == {
            "window-kind": "tumbling", "window-size": "2m", "watermark-delay": "1m", "watermark-interval": "1s",
            "allowed-lateness": "0s", "dedup-horizon": "1h",
        }, name


def test_a_stream_with_other_settings_is_refused(spark, lake):
    with pytest.raises(SettingsConflict, match=r"window-size 2m \(table\) against 1m \(this run\)"):
        run_speed(spark, config(lake), available_now=True)


def test_reconcile_uses_the_tables_windows_and_refuses_a_contradicting_flag(lake, tmp_path):
    env = {**os.environ, "LKLAB_LAKE": str(lake), "LKLAB_TABLE_ENGINE": "deltalake"}
    for name in ("LKLAB_WINDOW_SIZE", "LKLAB_WINDOW_KIND"):
        env.pop(name, None)
    done = subprocess.run([LKLAB, "reconcile", "--json"], capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert '"windows": "tumbling 2m"' in done.stdout
    refused = subprocess.run([LKLAB, "reconcile", "--window-size", "1m"], capture_output=True, text=True, env=env, timeout=600)
    assert refused.returncode == 2
    assert "--window-size 1m given, the speed layer holds 2m" in refused.stderr

"""The speed-layer health check on a lake the real speed layer wrote.

One small log, one ``spark_jobs/speed_job.py --available-now`` run over it (shared with the
Airflow tests); each test works on its own copy and moves the clock (``now``) or the log,
never the table.
"""

from __future__ import annotations

import json
import math
import os
import time
from datetime import datetime, timedelta, timezone

import pytest
from deltalake import DeltaTable

from lklab.health import SpeedLayerUnhealthy, require_healthy_stream, stream_health
from shared.eventlog import EventLog
from tests.processes import VENV_BIN, airflow_env, airflow_home, copy_lake, run, speed_layer_lake

pytestmark = pytest.mark.slow
HOUR = 3600.0


@pytest.fixture(scope="module")
def template(tmp_path_factory):
    day = (datetime.now(timezone.utc) - timedelta(days=1)).date()
    return speed_layer_lake(tmp_path_factory.getbasetemp(), day)


@pytest.fixture
def lake(template, tmp_path):
    return copy_lake(template, tmp_path / "lake")


@pytest.fixture
def home(tmp_path_factory, tmp_path):
    return airflow_home(tmp_path_factory.getbasetemp(), tmp_path / "airflow-home")


def newest_metrics(lake) -> dict:
    rows = DeltaTable(str(lake / "tables" / "stream_metrics")).to_pyarrow_dataset().to_table().to_pylist()
    return max(rows, key=lambda row: row["batch_id"])


def test_caught_up_stream_is_healthy(lake):
    segments = EventLog(lake).last_segment()
    newest = newest_metrics(lake)
    committed = DeltaTable(str(lake / "tables" / "stream_metrics")).history(1)[0]["timestamp"] / 1000
    # The shared template may have been written long before this test runs: check freshness
    # against the clock the check was given, one minute after the last commit.
    now = committed + 60
    health = stream_health(lake, max_staleness="10m", max_watermark_lag="1d", now=now)
    assert health.healthy and health.reasons == ()
    # --segments-per-batch 4 over the whole log: ceil(segments / 4) micro-batches, numbered from 0.
    assert health.last_batch_id == math.ceil(segments / 4) - 1
    assert (health.last_segment_read, health.log_last_segment, health.segments_behind) == (segments, segments, 0)
    assert health.oldest_unread_wait_seconds is None
    assert health.watermark_lag_seconds == newest["watermark_lag_seconds"]
    assert health.freshness_seconds == pytest.approx(60)
    assert health.last_commit_at.timestamp() == pytest.approx(committed)
    assert health.as_dict()["healthy"] is True


def test_idle_stream_over_a_quiet_log_is_healthy(lake):
    health = stream_health(lake, max_staleness="10m", max_watermark_lag="1d", now=time.time() + 5 * HOUR)
    assert health.freshness_seconds > 5 * HOUR - 60
    assert health.healthy


def test_stream_that_stopped_reading_is_stalled(lake):
    segment = EventLog(lake).append(['{"event_id": "late-arrival"}'])
    health = stream_health(lake, max_staleness="10m", max_watermark_lag="1d", now=time.time() + HOUR)
    assert (health.segments_behind, health.log_last_segment) == (1, segment.number)
    assert health.oldest_unread_wait_seconds > HOUR - 60
    assert not health.healthy
    assert len(health.reasons) == 1 and health.reasons[0].startswith("stalled: no micro-batch committed for ")
    assert "while 1 segment(s) wait" in health.reasons[0]
    with pytest.raises(SpeedLayerUnhealthy, match="stalled") as raised:
        require_healthy_stream(lake, max_staleness="10m", max_watermark_lag="1d", now=time.time() + HOUR)
    assert raised.value.health.segments_behind == 1
    assert "speed layer UNHEALTHY" in str(raised.value)


def test_segment_published_just_now_after_a_quiet_hour_is_not_a_stall(lake):
    segment = EventLog(lake).append(['{"event_id": "first-after-quiet"}'])
    now = time.time() + HOUR
    os.utime(segment.path, (now - 5, now - 5))
    health = stream_health(lake, max_staleness="10m", max_watermark_lag="1d", now=now)
    assert health.segments_behind == 1 and 4 <= health.oldest_unread_wait_seconds <= 6
    assert health.healthy


def test_watermark_lag_over_the_limit_is_lagging(lake):
    lag = newest_metrics(lake)["watermark_lag_seconds"]
    limit = f"{int(lag) - 1}s"
    health = stream_health(lake, max_staleness="10m", max_watermark_lag=limit)
    assert health.reasons == (f"lagging: watermark lag {lag:,.0f}s exceeds {limit} (micro-batch {health.last_batch_id})",)
    assert stream_health(lake, max_staleness="10m", max_watermark_lag=f"{int(lag) + 1}s").healthy


def test_a_lake_the_stream_never_wrote_is_unhealthy(template, tmp_path):
    lake = tmp_path / "fresh"
    (lake / "log").mkdir(parents=True)
    for segment in EventLog(template).segments()[:2]:
        EventLog(lake).append_file(segment.path)
    health = stream_health(lake)
    assert (health.last_batch_id, health.freshness_seconds, health.segments_behind) == (None, None, 2)
    assert health.reasons == (
        f"no stream_metrics table under {lake.resolve() / 'tables'}: the speed layer has not committed a micro-batch",
    )


def test_thresholds_are_durations(lake):
    with pytest.raises(ValueError, match="max-staleness: '10' needs a unit"):
        stream_health(lake, max_staleness="10")


def test_speed_layer_health_dag_passes_and_fails_loudly(lake, home):
    """The DAG's task on the configured lake (LKLAB_LAKE): a real run, then a failing task."""
    airflow = str(VENV_BIN / "airflow")
    env = airflow_env(home, lake)
    passed = run([airflow, "dags", "test", "speed_layer_health", "-c", json.dumps({"max_watermark_lag": "1d"})],
                 env=env, timeout=180)
    output = passed.stdout + passed.stderr
    assert passed.returncode == 0 and "state=success" in output, output[-4000:]
    assert "speed layer healthy" in output
    failed = run([airflow, "tasks", "test", "speed_layer_health", "check_stream_metrics",
                  "-t", json.dumps({"max_watermark_lag": "1s"})], env=env, timeout=180)
    output = failed.stdout + failed.stderr
    # `tasks test` exits 0 whatever the task does; the failure is in the task's log and state.
    assert "Task failed with exception" in output and "new_state=up_for_retry" in output, output[-4000:]
    assert "lklab.health.SpeedLayerUnhealthy: speed layer UNHEALTHY" in output and "lagging: watermark lag" in output

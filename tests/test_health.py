"""The speed-layer health check on a lake the real speed layer wrote.

One small log, one ``spark_jobs/speed_job.py --available-now`` run over it (shared with the
Airflow tests); each test works on its own copy and moves the clock (``now``) or the log,
never the table. The watermark's lead over arrival is checked on ``stream_metrics`` rows with
an exact lag and on a real stream over an event as far ahead as the stream accepts.
"""

from __future__ import annotations

import json
import math
import time
from datetime import UTC, datetime, timedelta

import pytest
from deltalake import DeltaTable, write_deltalake

from lklab.health import NoLake, SpeedLayerUnhealthy, require_healthy_stream, require_healthy_streams, stream_health
from lklab.pipelines.billing_windows.speed import run_speed
from shared.config import LabConfig, load_config
from shared.eventlog import EventLog
from shared.stream_metrics import BatchFigures, metrics_table
from shared.table_settings import record, stream_settings
from shared.tables import Tables
from tests.conftest import event_line
from tests.processes import VENV_BIN, airflow_env, airflow_home, copy_lake, run, speed_layer_lake

slow = pytest.mark.slow  # the tests on the shared speed-layer lake
HOUR = 3600.0


@pytest.fixture(scope="module")
def template(spark, tmp_path_factory):
    day = (datetime.now(UTC) - timedelta(days=1)).date()
    return speed_layer_lake(tmp_path_factory.getbasetemp(), day, spark)


@pytest.fixture
def lake(template, tmp_path):
    return copy_lake(template, tmp_path / "lake")


@pytest.fixture
def home(tmp_path_factory, tmp_path):
    return airflow_home(tmp_path_factory.getbasetemp(), tmp_path / "airflow-home")


def newest_metrics(lake) -> dict:
    rows = DeltaTable(str(lake / "tables" / "stream_metrics")).to_pyarrow_dataset().to_table().to_pylist()
    return max(rows, key=lambda row: row["batch_id"])


@slow
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


@slow
def test_idle_stream_over_a_quiet_log_is_healthy(lake):
    health = stream_health(lake, max_staleness="10m", max_watermark_lag="1d", now=time.time() + 5 * HOUR)
    assert health.freshness_seconds > 5 * HOUR - 60
    assert health.healthy


@slow
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


@slow
def test_segment_published_just_now_after_a_quiet_spell_is_not_a_stall(lake):
    """No micro-batch for longer than the limit, but only because the log was quiet: the one
    segment waiting was published (``EventLog.published_at``) less than the limit ago."""
    committed = DeltaTable(str(lake / "tables" / "stream_metrics")).history(1)[0]["timestamp"] / 1000
    time.sleep(max(0.0, committed + 2.5 - time.time()))  # the last commit at least 2.5 s old
    log = EventLog(lake)
    segment = log.append(['{"event_id": "first-after-quiet"}'])
    now = log.published_at(segment.number) + 1.0
    health = stream_health(lake, max_staleness="2s", max_watermark_lag="1d", now=now)
    assert health.freshness_seconds > 2 and health.segments_behind == 1
    assert health.oldest_unread_wait_seconds == pytest.approx(1.0)
    assert health.healthy, health.reasons
    later = stream_health(lake, max_staleness="2s", max_watermark_lag="1d", now=now + 1.5)
    assert not later.healthy and "stalled" in later.reasons[0]


@slow
def test_a_stream_that_read_the_whole_log_is_idle_not_lagging(lake):
    """The late arrivals at the end of the log leave the watermark hours behind their arrival,
    and nothing is left to read: idle, healthy, with the windows a heartbeat would close."""
    lag = newest_metrics(lake)["watermark_lag_seconds"]
    assert lag > 15 * 60
    log = EventLog(lake)
    last_append = log.published_at(log.segments()[-1].number)  # this copy's
    now = time.time() + 60
    health = stream_health(lake, now=now)  # the default limits: 10m, 15m
    assert (health.segments_behind, health.reasons, health.idle, health.healthy) == (0, (), True, True)
    assert health.log_quiet_seconds == pytest.approx(now - last_append)
    state = DeltaTable(str(lake / "tables" / "stream_state")).to_pyarrow_dataset().to_table().to_pylist()
    held = sorted(
        {(r["window_start"], r["window_end"]) for r in state if r["kind"] == "window" and r["status"] == "open"}
    )
    assert held, "the stream's last windows wait for a watermark that only a later line moves"
    iso = lambda moment: moment.isoformat().replace("+00:00", "Z")
    assert health.open_windows == tuple((iso(start), iso(end)) for start, end in held)
    described = health.describe()
    assert described.startswith("speed layer healthy, idle (")
    assert f"open windows a heartbeat would close: {len(held)}: [{iso(held[0][0])}, {iso(held[0][1])})" in described
    assert "the watermark lag over its limit is no alarm while idle" in described
    # the limits as the durations they are given as
    assert "ago (limit 10m)" in described and "(limit 15m; the watermark may lead arrival by " in described
    over_a_day = stream_health(lake, now=now, latency_window="1d").describe()
    assert "micro-batch(es) in the last 1d" in over_a_day and "(limit on a batch's p95: 2m" in over_a_day
    assert health.as_dict()["idle"] is True


@slow
def test_watermark_lag_over_the_limit_is_lagging_once_segments_wait(lake):
    lag = newest_metrics(lake)["watermark_lag_seconds"]
    limit = f"{int(lag) - 1}s"
    EventLog(lake).append(['{"event_id": "unread"}'])
    health = stream_health(lake, max_staleness="10m", max_watermark_lag=limit)
    assert (health.segments_behind, health.idle, health.open_windows) == (1, False, None)
    assert health.reasons == (
        f"lagging: watermark lag {lag:,.0f}s exceeds {limit} (micro-batch {health.last_batch_id})",
    )
    assert stream_health(lake, max_staleness="10m", max_watermark_lag=f"{int(lag) + 1}s").healthy


@slow
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


def test_a_lake_that_is_not_there_is_no_verdict_but_an_error(tmp_path):
    with pytest.raises(NoLake, match=f"lake {tmp_path / 'typo'}: no such directory"):
        stream_health(tmp_path / "typo")
    with pytest.raises(NoLake, match="holds no lake"):
        stream_health(tmp_path)


@slow
def test_thresholds_are_durations(lake):
    with pytest.raises(ValueError, match="max-staleness: '10' needs a unit"):
        stream_health(lake, max_staleness="10")


@slow
def test_speed_layer_health_dag_passes_and_fails_loudly(lake, home):
    """The DAG's task on the configured lake (LKLAB_LAKE): a real run, then a failing task."""
    airflow = str(VENV_BIN / "airflow")
    env = airflow_env(home, lake)
    passed = run(
        [airflow, "dags", "test", "speed_layer_health", "-c", json.dumps({"max_watermark_lag": "1d"})],
        env=env,
        timeout=180,
    )
    output = passed.stdout + passed.stderr
    assert passed.returncode == 0 and "state=success" in output, output[-4000:]
    assert "speed layer healthy" in output
    EventLog(lake).append(['{"event_id": "unread"}'])  # behind: the lag is an alarm again
    failed = run(
        [
            airflow,
            "tasks",
            "test",
            "speed_layer_health",
            "check_stream_metrics",
            "-t",
            json.dumps({"max_watermark_lag": "1s"}),
        ],
        env=env,
        timeout=180,
    )
    output = failed.stdout + failed.stderr
    # `tasks test` exits 0 whatever the task does; the failure is in the task's log and state.
    assert "Task failed with exception" in output and "new_state=up_for_retry" in output, output[-4000:]
    assert "lklab.health.SpeedLayerUnhealthy: speed layer UNHEALTHY" in output and "lagging: watermark lag" in output


# --- the watermark ahead of arrival -------------------------------------------------------

INGEST = 1_767_614_400_000_000  # 2026-01-05T12:00:00Z, microseconds
SECOND = 1_000_000


def one_batch(lake, watermark_ahead: int, settings: dict | None):
    """A lake whose ``stream_metrics`` holds one micro-batch handing on a watermark
    ``watermark_ahead`` microseconds after its latest ingest time, with ``settings`` recorded."""
    figures = BatchFigures(
        batch_id=0,
        first_segment=1,
        last_segment=1,
        input_lines=1,
        on_time=1,
        late=0,
        late_updates=0,
        duplicates=0,
        dead_letters=0,
        heartbeats=0,
        watermark=None,
        next_watermark=INGEST + watermark_ahead,
        max_event_time=None,
        latest_ingest=INGEST,
        state_rows=1,
        on_time_amounts=[],
        late_amounts=[],
        duplicate_amounts=[],
        duration_seconds=0.1,
    )
    write_deltalake(str(lake / "tables" / "stream_metrics"), metrics_table([figures]))
    if settings is not None:
        record(Tables(None, lake, "deltalake"), ["stream_metrics"], settings)
    return lake


def settings(**changed) -> dict:
    return {**stream_settings(LabConfig()), **changed}


def ahead(seconds: str, allowed: str, rule: str) -> tuple[str]:
    return (
        f"ahead: the watermark is {seconds}s ahead of the latest ingest time (micro-batch 0), more than the {allowed}s an "
        f"accepted event can put it ahead ({rule}): a clock the stream did not catch moved it, and every event behind it "
        "is judged late",
    )


@pytest.mark.parametrize("skew, delay, allowed", [("5m", "1m", 240), ("10m", "30s", 570), ("1m", "5m", 0)])
def test_the_watermark_may_lead_arrival_by_max_clock_skew_less_watermark_delay_and_not_a_microsecond_more(
    tmp_path, skew, delay, allowed
):
    recorded = settings(**{"max-clock-skew": skew, "watermark-delay": delay})
    at_limit = stream_health(one_batch(tmp_path / "at", allowed * SECOND, recorded), max_watermark_lag="1d")
    assert (at_limit.watermark_lag_seconds, at_limit.max_watermark_lead_seconds, at_limit.reasons) == (
        -allowed,
        allowed,
        (),
    )
    over = stream_health(one_batch(tmp_path / "over", allowed * SECOND + 1, recorded), max_watermark_lag="1d")
    assert over.watermark_lag_seconds == -(allowed * SECOND + 1) / SECOND
    assert over.reasons == ahead(
        f"{allowed}.000001", f"{allowed}", f"max-clock-skew {skew} less watermark-delay {delay}, its settings"
    )
    assert not over.healthy and "the watermark may lead arrival by" in over.describe()


def test_a_table_that_recorded_no_settings_is_held_to_the_labs_defaults(tmp_path):
    assert stream_health(one_batch(tmp_path / "at", 240 * SECOND, None), max_watermark_lag="1d").healthy
    over = stream_health(one_batch(tmp_path / "over", 241 * SECOND, None), max_watermark_lag="1d")
    assert over.reasons == ahead(
        "241", "240", "max-clock-skew 5m less watermark-delay 1m, the lab's defaults (the table recorded no settings)"
    )


def test_a_real_stream_over_an_event_as_far_ahead_as_it_accepts_is_healthy(spark, tmp_path):
    """With the default settings an event dated 5m after its ingest time is accepted and puts
    the watermark 4 minutes ahead of arrival: no false alarm."""
    EventLog(tmp_path).append(
        [event_line(event_time="2026-01-05T12:05:00Z", ingest_time="2026-01-05T12:00:00Z")], stamp=False
    )
    config = load_config(
        None, {"lake": str(tmp_path), "table-engine": "deltalake", "watermark-interval": "0"}, environ={}
    )
    run_speed(spark, config, available_now=True)
    health = stream_health(tmp_path, max_watermark_lag="1d")
    assert (health.watermark_lag_seconds, health.max_watermark_lead_seconds, health.reasons) == (-240.0, 240.0, ())


# --- every pipeline's live stream -----------------------------------------------------------


def test_every_pipeline_stream_declares_the_table_health_reads():
    from lklab.pipelines import REGISTRY

    for pipeline in REGISTRY.values():
        rule = pipeline.stream()
        if rule is not None:
            schema = rule.metrics.schema.names
            assert {"batch_id", "last_segment"} <= set(schema), pipeline.name


def test_a_pipeline_stream_is_watched_once_it_has_committed(spark, tmp_path, monkeypatch, capsys):
    """``running_max``'s stream has no watermark: freshness and backlog are checked, the lag is
    said to be unrecorded; the stream is watched once it has committed in the lake."""
    from lklab.cli import main
    from lklab.health import streams_health, watched_streams

    for name in ("LKLAB_PIPELINE", "LKLAB_CONFIG", "LKLAB_LAKE"):
        monkeypatch.delenv(name, raising=False)
    lake = tmp_path / "lake"
    reading = '{{"event_id": "r{0}", "event_time": "2026-01-05T10:00:0{0}Z", "key": "a", "value": {0}}}'
    for number in (1, 2):
        EventLog(lake).append([reading.format(number)])
    assert [stream.pipeline for stream in watched_streams(lake)] == ["billing_windows"]
    args = ["--pipeline", "running_max", "--lake", str(lake), "--table-engine", "deltalake"]
    assert main(["speed", "--available-now", *args]) == 0
    assert [stream.pipeline for stream in watched_streams(lake)] == ["billing_windows", "running_max"]
    checked = dict((stream.pipeline, health) for stream, health in streams_health(lake, now=time.time() + 60))
    running_max = checked["running_max"]
    assert running_max.healthy and running_max.what == "running_max stream"
    assert (running_max.last_batch_id, running_max.last_segment_read, running_max.segments_behind) == (1, 2, 0)
    assert (running_max.records_lag, running_max.watermark_lag_seconds) == (False, None)
    assert "watermark lag: not recorded by this stream" in running_max.describe()
    capsys.readouterr()
    assert main(["health", "--pipeline", "running_max", "--lake", str(lake), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["table_path"].endswith("max_stream_metrics")
    # billing's speed layer, the default, never ran in this lake: exit 3, saying so
    assert main(["health", "--lake", str(lake)]) == 3
    assert "speed layer UNHEALTHY" in capsys.readouterr().out
    # billing's speed layer never ran here: unhealthy, and said so by name
    assert checked["billing_windows"].reasons == (
        f"no stream_metrics table under {lake.resolve() / 'tables'}: the speed layer has not committed a micro-batch",
    )
    with pytest.raises(SpeedLayerUnhealthy) as raised:
        require_healthy_streams(lake)
    assert "speed layer UNHEALTHY" in str(raised.value) and "running_max stream healthy" in str(raised.value)

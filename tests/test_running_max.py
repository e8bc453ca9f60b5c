"""``running_max``, the contract's smallest pipeline, through every runner (``lklab COMMAND
--pipeline running_max``, in process, in the tests' Spark session): the live stream one segment
per micro-batch, the batch truth, a Kappa replay and both reconciliations, on a hand-made log
with exact expected values. Every line lands in exactly one place; a rerun changes nothing."""

from __future__ import annotations

import json
import shutil

import pyarrow as pa
import pytest

from lklab.cli import main
from lklab.pipelines.running_max.parse import parse_readings
from lklab.pipelines.running_max.rule import MaxState, max_step
from lklab.pipelines.running_max.tables import (
    MAX_BATCH_DEAD_LETTER,
    MAX_BATCH_DUPLICATES,
    MAX_DEAD_LETTER,
    MAX_DUPLICATES,
    MAX_STREAM,
    MAX_TRUTH,
)
from shared import catalog
from shared.eventlog import EventLog
from shared.micro_batch import TIMING_COLUMNS
from shared.tables import Tables


def reading(event_id: str, key: str, value, second: int, **extra) -> str:
    fields = {
        "event_id": event_id,
        "event_time": f"2026-01-05T10:00:{second:02d}Z",
        "key": key,
        "value": value,
        "ingest_time": f"2026-01-05T10:00:{second + 1:02d}Z",
        **extra,
    }
    return json.dumps(fields)


SEGMENTS = [
    [reading("r1", "a", 5, 0), reading("r2", "b", 7, 1), reading("r3", "a", 9, 2)],
    [reading("r1", "a", 5, 0), '{"event_id": "bad", "value": ', reading("r4", "b", 3, 4)],  # a retry, a cut line
    [
        reading("r5", "a", 2, 6),
        reading("r6", "c", "11", 7),
        '{"heartbeat": true, "ingest_time": "2026-01-05T10:00:09Z"}',
    ],
    [reading("r7", "c", 4, 8), reading("r2", "b", 8, 1)],  # r2 again, another payload: a conflicting duplicate
]
# a 9, b 7, c 4: r6's value is a string (wrong_type), r2's second copy counts once
TRUTH = [("a", 9, 3), ("b", 7, 2), ("c", 4, 1)]


@pytest.fixture
def lab(spark, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for name in ("LKLAB_PIPELINE", "LKLAB_CONFIG", "LKLAB_LAKE"):
        monkeypatch.delenv(name, raising=False)
    lake = tmp_path / "lake"
    for lines in SEGMENTS:
        EventLog(lake).append(lines, stamp=False)
    return lake


def run(lake, *args) -> int:
    return main([*args, "--pipeline", "running_max", "--lake", str(lake), "--table-engine", "deltalake"])


def rows(spark, lake, table, columns):
    return sorted(tuple(r[c] for c in columns) for r in Tables(spark, lake, "deltalake").read_arrow(table).to_pylist())


def test_the_step_sends_every_line_to_one_place():
    import pyarrow as pa

    from shared.log_source import _ARROW_SCHEMA  # the raw lines' shape

    raw = pa.table(
        {
            "segment": [1] * 4,
            "line_number": [1, 2, 3, 4],
            "raw_line": [SEGMENTS[0][0], SEGMENTS[0][2], SEGMENTS[1][0], SEGMENTS[2][1]],
            "line_bytes": [
                len(line.encode()) for line in (SEGMENTS[0][0], SEGMENTS[0][2], SEGMENTS[1][0], SEGMENTS[2][1])
            ],
            "appended_at": [None] * 4,
        },
        _ARROW_SCHEMA,
    )
    batch = max_step(parse_readings(raw, 300_000_000), MaxState(), 0)
    assert batch.changes.select(["key", "max_value", "events"]).to_pylist() == [
        {"key": "a", "max_value": 9, "events": 2}
    ]
    assert batch.duplicates["event_id"].to_pylist() == ["r1"] and batch.duplicates["payload_conflict"].to_pylist() == [
        False
    ]
    assert [(r["reject_reason"], r["reject_detail"]) for r in batch.dead_letters.to_pylist()] == [
        ("wrong_type", "value")
    ]
    assert batch.conserved


def test_speed_batch_replay_and_reconcile_agree_exactly(spark, lab, capsys):
    assert run(lab, "speed", "--available-now") == 0
    assert "4 micro-batches: 11 lines = 6 readings + 2 duplicates + 2 dead letters + 1 heartbeats (conserved)" in (
        capsys.readouterr().out
    )
    assert rows(spark, lab, MAX_STREAM.name, ("key", "max_value", "events", "updated_batch_id")) == [
        ("a", 9, 3, 2),  # r5 (2) in batch 2 counts but does not raise the maximum
        ("b", 7, 2, 1),
        ("c", 4, 1, 3),
    ]
    assert rows(spark, lab, MAX_DUPLICATES.name, ("event_id", "first_segment", "payload_conflict", "batch_id")) == [
        ("r1", 1, False, 1),
        ("r2", 1, True, 3),
    ]
    assert rows(spark, lab, MAX_DEAD_LETTER.name, ("segment", "reject_reason", "reject_detail")) == [
        (2, "not_json", None),
        (3, "wrong_type", "value"),
    ]
    assert run(lab, "batch") == 0
    assert "11 lines = 6 readings + 2 duplicates + 2 dead letters + 1 heartbeats (conserved)" in capsys.readouterr().out
    assert rows(spark, lab, MAX_TRUTH.name, ("key", "max_value", "events")) == TRUTH
    assert rows(spark, lab, MAX_BATCH_DUPLICATES.name, ("event_id", "payload_conflict")) == [
        ("r1", False),
        ("r2", True),
    ]
    assert rows(spark, lab, MAX_BATCH_DEAD_LETTER.name, ("segment", "line_number")) == [(2, 2), (3, 2)]
    assert run(lab, "reconcile") == 0
    out = capsys.readouterr().out
    assert "match 3, value_mismatch 0, missing_in_stream 0, extra_in_stream 0" in out
    assert "unexplained: 0 keys" in out
    assert run(lab, "replay", "--name", "once") == 0
    assert "replay once: 4 micro-batches: 11 lines = 6 readings" in capsys.readouterr().out
    assert rows(spark, lab, MAX_STREAM.at("kappa/once/"), ("key", "max_value", "events", "updated_batch_id")) == [
        ("a", 9, 3, 2),  # one segment per micro-batch, as the live stream read them
        ("b", 7, 2, 1),
        ("c", 4, 1, 3),
    ]
    assert run(lab, "reconcile", "--against", "kappa:once") == 0
    assert "match 3, value_mismatch 0" in capsys.readouterr().out
    assert run(lab, "replay", "--name", "once") == 2  # its tables exist: refused, not replaced
    assert "already has kappa/once/max_state" in capsys.readouterr().err


def test_a_stream_behind_the_log_differs_only_by_what_it_has_not_read(spark, lab, capsys):
    assert run(lab, "speed", "--available-now") == 0
    EventLog(lab).append([reading("r8", "b", 20, 10), reading("r9", "d", 1, 11)], stamp=False)
    assert run(lab, "batch") == 0
    assert run(lab, "reconcile") == 0  # explained: the stream has not read segment 5 yet
    out = capsys.readouterr().out
    assert "(segments 1..4) against the truth (segments 1..5): match 2, value_mismatch 1, missing_in_stream 1" in out
    assert "explained: 2 keys with readings in segments the stream has not read yet" in out
    assert run(lab, "speed", "--available-now") == 0
    assert run(lab, "reconcile") == 0
    assert "match 4, value_mismatch 0, missing_in_stream 0, extra_in_stream 0" in capsys.readouterr().out


def result_bytes(spark, group: str) -> int:
    """The bytes the tasks of the jobs of ``group`` sent back to the driver: Spark's own
    ``resultSize`` of each of their completed stages, from the application's status REST API.

    Only completed stages ran tasks. A skipped stage has no completion time, so in a session
    that has run more stages than ``spark.ui.retainedStages`` Spark drops it from its store
    first, and asking for it alone answers 404: the list of completed stages is read instead."""
    import urllib.request

    context = spark.sparkContext
    base = f"{context.uiWebUrl}/api/v1/applications/{context.applicationId}"
    get = lambda path: json.load(urllib.request.urlopen(base + path))
    stages = {stage for job in get("/jobs") if job.get("jobGroup") == group for stage in job["stageIds"]}
    return sum(attempt["resultSize"] for attempt in get("/stages?status=complete") if attempt["stageId"] in stages)


def test_a_replay_brings_no_line_to_the_driver(spark, tmp_path):
    """Measured by Spark: over a log of some 10 MB, what the replay's tasks send back to the
    driver (schemas and totals, task metrics) stays a small fraction of the log, as it would not
    if its lines or rows were collected."""
    from lklab.pipelines.running_max.generator import ReadingParams, generate_readings
    from lklab.pipelines.running_max.stream import MAX_RULE
    from lklab.replay_runner import replay_on_executors
    from shared.config import LabConfig

    lake = tmp_path / "lake"
    generate_readings(ReadingParams(readings=100_000, keys=1_000, segment_interval=7_200_000_000), lake)  # 14 segments
    log_bytes = sum(path.stat().st_size for path in (lake / "log").rglob("*") if path.is_file())
    assert log_bytes > 8_000_000
    spark.sparkContext.setJobGroup("replay-result-bytes", "a replay whose driver traffic is measured")
    try:
        done = replay_on_executors(spark, LabConfig(lake=lake, table_engine="deltalake"), MAX_RULE, "measured")
    finally:
        spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)
    assert done.lines > 100_000
    assert 0 < result_bytes(spark, "replay-result-bytes") < log_bytes // 20


def test_the_replay_writes_the_live_rows_exactly(spark, lab):
    from lklab.pipelines.running_max.stream import MAX_RULE
    from lklab.replay_runner import replay_on_executors
    from shared.config import LabConfig

    assert run(lab, "speed", "--available-now") == 0
    config = LabConfig(lake=lab, table_engine="deltalake")
    done = replay_on_executors(spark, config, MAX_RULE, "exact")
    assert (done.segments, done.lines, done.micro_batches) == (4, 11, 4)
    tables = Tables(spark, lab, "deltalake")
    for entry in MAX_RULE.layout:
        live, replayed = (tables.read_arrow(entry.table.at(prefix)) for prefix in ("", done.prefix))
        assert replayed.column_names == live.column_names, entry.table.name
        timing = [name for name in TIMING_COLUMNS if name in live.column_names]  # a replay serves nothing live
        live, replayed = live.drop_columns(timing), replayed.drop_columns(timing)
        assert sorted(map(str, replayed.to_pylist())) == sorted(map(str, live.to_pylist())), entry.table.name
    with pytest.raises(FileExistsError, match="already has kappa/exact/max_state"):
        replay_on_executors(spark, config, MAX_RULE, "exact")
    again = replay_on_executors(spark, config, MAX_RULE, "exact", replace=True, segments_per_batch=3)
    assert again.micro_batches == 2
    stream = tables.read_arrow(MAX_STREAM.at(again.prefix)).sort_by("key")
    assert stream.select(["key", "max_value", "events", "updated_batch_id"]).to_pylist() == [
        {"key": "a", "max_value": 9, "events": 3, "updated_batch_id": 0},
        {"key": "b", "max_value": 7, "events": 2, "updated_batch_id": 0},
        {"key": "c", "max_value": 4, "events": 1, "updated_batch_id": 1},
    ]


def _toy_step(parsed, batches, settings, batch_id, started):
    """Each key's last valid reading of the micro-batch, merged by key; a reading of 2 deletes its key."""
    import pyarrow as pa

    from lklab.live_stream import StepOutput

    last = {}
    for line in parsed.to_pylist():
        if line["reject_reason"] is None and line["key"] is not None:
            last[line["key"]] = line["value"]
    rows = pa.table(
        {
            "key": pa.array(list(last), pa.string()),
            "value": pa.array(list(last.values()), pa.int64()),
            "_delete": pa.array([value == 2 for value in last.values()], pa.bool_()),
        }
    )
    state = pa.table({"batches": pa.array([batches + 1], pa.int64())})
    return StepOutput({TOY_LATEST: rows, TOY_STATE: state}, batches + 1, {})


def _toy_read(lines, config):
    return parse_readings(lines, config.max_clock_skew)


def _toy_rule():
    from lklab.live_stream import StateKind, StreamRule
    from lklab.stream_sink import MERGE, OVERWRITE, SinkTable

    return StreamRule(
        what="toy stream",
        app_id="toy",
        layout=(SinkTable(TOY_LATEST, MERGE, ("key",)), SinkTable(TOY_STATE, OVERWRITE)),
        settings=lambda config: None,
        table_settings=lambda config: {},
        state=StateKind(lambda: 0, lambda rows: rows["batches"][0].as_py()),
        step=_toy_step,
        read=_toy_read,
    )


TOY_LATEST_SCHEMA = pa.schema([pa.field("key", pa.string()), pa.field("value", pa.int64())])
TOY_STATE_SCHEMA = pa.schema([pa.field("batches", pa.int64())])
TOY_LATEST = catalog.Table("toy_latest", "tests.test_running_max:TOY_LATEST_SCHEMA")
TOY_STATE = catalog.Table("toy_state", "tests.test_running_max:TOY_STATE_SCHEMA")


def test_a_replayed_merge_keeps_each_keys_last_row_and_drops_deleted_keys_as_the_live_sink(spark, lab):
    from lklab.live_stream import run_live
    from lklab.replay_runner import replay_on_executors
    from shared.config import LabConfig

    config, rule = LabConfig(lake=lab, table_engine="deltalake"), _toy_rule()
    run_live(spark, config, rule, available_now=True)
    done = replay_on_executors(spark, config, rule, "toy")
    tables = Tables(spark, lab, "deltalake")
    live, replayed = (tables.read_arrow(TOY_LATEST.at(prefix)).sort_by("key") for prefix in ("", done.prefix))
    # a: 9, then 5, then 2 (deleted); b: 7, 3, then 8; c: "11" rejected, then 4
    assert live.column_names == replayed.column_names == ["key", "value"]
    assert replayed.to_pylist() == live.to_pylist() == [{"key": "b", "value": 8}, {"key": "c", "value": 4}]
    assert tables.read_arrow(TOY_STATE.at(done.prefix)).to_pylist() == [{"batches": 4}]
    # a replay without its state (interrupted before its commit point) starts over without --replace
    shutil.rmtree(tables.path(TOY_STATE.at(done.prefix)))
    again = replay_on_executors(spark, config, rule, "toy")
    assert tables.read_arrow(TOY_LATEST.at(again.prefix)).sort_by("key").to_pylist() == replayed.to_pylist()

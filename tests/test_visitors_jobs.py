"""The ``unique_visitors`` jobs on one small generated log: the speed layer whatever the
micro-batch cuts, across a restart and across SIGKILLs at its crash points (on a tiny log), the replay equal to it, the
batch truth equal to the oracle, reconciliation proving corrected == truth once, and the CLI end
to end (its commands called in this process). Then a quiet log: the always-on stream's heartbeat makes its windows final."""

from __future__ import annotations

import json
import shutil
import threading
import time
from pathlib import Path

import pytest
from deltalake import DeltaTable

from lklab.pipelines.unique_visitors.batch import run_visitors_batch
from lklab.pipelines.unique_visitors.generator import (
    PageViewParams,
    generate_page_views,
    load_page_views,
)
from lklab.pipelines.unique_visitors.reconcile import reconcile_visitors
from lklab.pipelines.unique_visitors.speed import VISITORS_RULE, run_visitors_speed
from lklab.pipelines.unique_visitors.tables import (
    VISITORS_CORRECTED,
    VISITORS_SPEED_TABLES,
    VISITORS_STATE,
    VISITORS_STREAM_METRICS,
    VISITORS_TRUTH,
)
from lklab.pipelines.unique_visitors.truth import truth_counts as oracle_counts
from lklab.replay_runner import replay_on_executors
from shared.catalog import replay_prefix
from shared.config import LabConfig
from shared.durations import parse_duration
from shared.eventlog import EventLog
from shared.micro_batch import TIMING_COLUMNS
from shared.tables import Tables
from tests.visitor_lines import at, seconds_of, url

SECOND = 1_000_000
# ~300 views over 10 minutes in 1-minute segments (12 segments), with resends and bad lines;
# clickstream holds a minute's views back, so some arrive beyond the watermark.
PARAMS = PageViewParams(
    views=300, seed=3, span=600 * SECOND, users=20, pages=30, duplicate_rate=0.03, malformed_rate=0.02
)
# Columns that name the micro-batch (or its position in the run's metrics), not the decision.
BATCH_COLUMNS = ("batch_id", "updated_batch_id", "added_batch_id")


def config_for(lake: Path) -> LabConfig:
    return LabConfig(lake=lake, table_engine="deltalake")


def copy_segments(source: Path, lake: Path, first: int, last: int) -> None:
    source_log, log = EventLog(source), EventLog(lake)
    log.root.mkdir(parents=True, exist_ok=True)
    for number in range(first, last + 1):
        shutil.copy(source_log.segment_path(number), log.segment_path(number))


def stream_rows(spark, lake: Path, prefix: str = "") -> dict[str, list[dict]]:
    """Every stream table's rows (metrics aside), batch ids dropped, in a fixed order."""
    tables = Tables(spark, lake, "deltalake")
    rows = {}
    for table in VISITORS_SPEED_TABLES:
        if table is VISITORS_STREAM_METRICS:
            continue
        found = tables.read_arrow(table.at(prefix))
        found = found.drop_columns([name for name in BATCH_COLUMNS if name in found.column_names])
        rows[table.name] = sorted(found.to_pylist(), key=lambda r: tuple((v is None, str(v)) for v in r.values()))
    return rows


@pytest.fixture(scope="module")
def lakes(tmp_path_factory):
    root = tmp_path_factory.mktemp("visitors")
    generate_page_views(PARAMS, root / "one")
    return root


@pytest.fixture(scope="module")
def one_per_batch(spark, lakes):
    """The log read one segment per micro-batch (as the traffic came)."""
    layer = run_visitors_speed(spark, config_for(lakes / "one"), available_now=True, segments_per_batch=1)
    assert layer.batches == EventLog(lakes / "one").last_segment() == 12
    return stream_rows(spark, lakes / "one")


def test_speed_writes_the_same_rows_with_many_segments_per_batch(spark, lakes, one_per_batch):
    copy_segments(lakes / "one", lakes / "five", 1, 12)
    layer = run_visitors_speed(spark, config_for(lakes / "five"), available_now=True, segments_per_batch=5)
    assert layer.batches == 3
    rows = stream_rows(spark, lakes / "five")
    assert rows == one_per_batch
    assert (
        rows["visitors_late_events"] and rows["visitors_duplicates"] and rows["visitors_dead_letter"]
    )  # the log exercises each output


def test_a_restart_halfway_goes_on_with_the_same_rows(spark, lakes, one_per_batch):
    copy_segments(lakes / "one", lakes / "restart", 1, 6)
    first = run_visitors_speed(spark, config_for(lakes / "restart"), available_now=True)
    copy_segments(lakes / "one", lakes / "restart", 7, 12)
    second = run_visitors_speed(
        spark, config_for(lakes / "restart"), available_now=True
    )  # a new layer: the state read from its table
    assert (first.batches, second.batches) == (6, 6)
    assert stream_rows(spark, lakes / "restart") == one_per_batch


def test_replay_writes_the_rows_of_the_live_stream(spark, lakes, one_per_batch):
    run = replay_on_executors(spark, config_for(lakes / "one"), VISITORS_RULE, "whole")
    assert (run.segments, run.lines) == (12, 315)
    assert stream_rows(spark, lakes / "one", replay_prefix("whole")) == one_per_batch


def test_batch_truth_is_the_oracle_and_reconciliation_proves_the_stream_once(spark, lakes, one_per_batch):
    lake = lakes / "one"
    config = config_for(lake)
    run = run_visitors_batch(spark, config)
    assert run.conserved and (run.lines, run.views, run.duplicates, run.dead_letters) == (315, 300, 9, 6)
    tables = Tables(spark, lake, "deltalake")
    truth = tables.read_arrow(VISITORS_TRUTH.name).sort_by(
        [(name, "ascending") for name in ("window_start", "window_end", "user_id")]
    )
    assert truth.to_pylist() == oracle_counts(load_page_views(lake), config.window).to_pylist()

    reconciled = reconcile_visitors(spark, config, against="speed")
    assert reconciled.result.proven, reconciled.result.differences
    verdicts = reconciled.result.verdicts()
    assert verdicts["differs"] == 0 and verdicts["late"] > 0  # late views explain every served difference
    assert reconciled.written and reconciled.read_through == 12
    corrected = VISITORS_CORRECTED.at("")
    version = tables.version(corrected)
    again = reconcile_visitors(spark, config, against="speed")
    assert (again.run_id, again.written, tables.version(corrected)) == (reconciled.run_id, False, version)


def test_the_cli_generates_streams_recomputes_and_reconciles(spark, tmp_path, lklab_here):
    """Each command is ``lklab.cli.main`` called here, in the tests' Spark session (``lklab_here``):
    what is checked is what the commands write, print and return, not how a process starts (the
    crash test below runs ``lklab speed`` processes of this pipeline; ``tests/test_process_exit.py``
    checks that a process ends with ``main``'s code)."""
    common = ["--pipeline", "unique_visitors", "--lake", str(tmp_path / "lake")]
    commands = [
        ["generate", "--events", "120", "--seed", "5", "--span", "5m", "--accounts", "10"],
        ["speed", "--available-now", "--segments-per-batch", "2"],
        ["batch"],
        ["reconcile"],
    ]
    for command in commands:
        done = lklab_here(*command, *common)
        assert done.returncode == 0, (
            f"{command} exited {done.returncode}:\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}"
        )
    assert "proven: corrected" in done.stdout and "0 differing" in done.stdout

    # One truth member deleted by hand: a difference nothing explains, exit 3 and the verdict on stderr.
    members_path = tmp_path / "lake" / "tables" / "visitors_truth_members"
    members = DeltaTable(str(members_path)).to_pyarrow_dataset().to_table()
    member = members.sort_by([(c, "ascending") for c in ("user_id", "url", "window_start")]).to_pylist()[0]
    DeltaTable(str(members_path)).delete(
        f"user_id = '{member['user_id']}' AND url = '{member['url']}' AND window_start = '{member['window_start'].isoformat()}'"
    )
    done = lklab_here("reconcile", *common)
    assert done.returncode == 3, done.stdout[-2000:] + done.stderr[-4000:]
    assert "lklab reconcile: UNEXPLAINED: 1 differences" in done.stderr


def committed_rows(spark, lake: Path) -> dict[str, list[dict]]:
    """Every table the stream commits, its metrics (durations aside) and state included, batch ids
    kept, in a fixed order."""
    tables = Tables(spark, lake, "deltalake")
    found = {}
    for table in VISITORS_SPEED_TABLES:
        rows = tables.read_arrow(table.name)
        rows = rows.drop_columns([name for name in TIMING_COLUMNS if name in rows.column_names])
        found[table.name] = sorted(rows.to_pylist(), key=lambda r: tuple((v is None, str(v)) for v in r.values()))
    return found


def view_line(event_id: str, seconds: int, ingest: int, user: str = "u1", page: str = "home") -> str:
    return json.dumps(
        {
            "event_id": event_id,
            "user_id": user,
            "url": url(page),
            "event_time": at(seconds).isoformat().replace("+00:00", "Z"),
            "ingest_time": at(ingest).isoformat().replace("+00:00", "Z"),
        }
    )


# 5 s tumbling windows, the watermark 5 s behind. Batch 1 (segment 2) writes a row to every table:
# W = 12 - 5 = 7 for its lines, so shop at 3 s is late ([0, 5) closed), cart at 13 s is a new URL
# of [10, 15); v1 is resent, "{" is a dead letter.
CRASH_LOG = [
    [view_line("v0", 10, 10_000), view_line("v1", 12, 10_000, page="cart"), view_line("v2", 11, 10_000, user="u2")],
    [
        view_line("v3", 22, 10_001),
        view_line("v4", 3, 10_001, page="shop"),
        view_line("v1", 12, 10_001, page="cart"),
        "{",
        view_line("v5", 13, 10_001, user="u2", page="cart"),
    ],
    [view_line("v6", 30, 10_002, page="about")],
]
CRASH_SETTINGS = ["--window-size", "5s", "--watermark-delay", "5s"]


@pytest.mark.slow
def test_sigkill_at_named_points_then_a_restart_commits_the_rows_of_an_uninterrupted_run(spark, tmp_path):
    """One process killed at each crash point of batch 1 in turn (each goes on from the one
    before: batch 1 is replayed after every kill), then a clean run: every committed table equals
    an uninterrupted run's, batch ids and all. 17 points; each is a JVM start, so the last and one
    drawn at random (the first, before the batch writes, is every pipeline's: ``tests/crash_runs.py``)."""
    from lklab.crash_points import batch_points
    from lklab.pipelines.unique_visitors.speed import COMMIT_ORDER
    from shared.config import load_config
    from tests.crash_runs import kill_at_each, sampled_points

    for lake in (tmp_path / "clean", tmp_path / "crashes"):
        for lines in CRASH_LOG:
            EventLog(lake).append(lines, stamp=False)
    config = lambda lake: load_config(
        None, {"lake": str(lake), "table-engine": "deltalake", "window-size": "5s", "watermark-delay": "5s"}, environ={}
    )
    run_visitors_speed(spark, config(tmp_path / "clean"), available_now=True)
    expected = committed_rows(spark, tmp_path / "clean")
    assert all(expected[table.name] for table in COMMIT_ORDER)  # batch 1 writes to every table
    points = batch_points(1, [table.name for table in COMMIT_ORDER])
    assert len(points) == 17 and points[-1] == f"1:after:{VISITORS_STATE.name}"
    seed, sample = sampled_points(points, 1, first=False)
    kill_at_each(tmp_path / "crashes", "unique_visitors", CRASH_SETTINGS, sample, seed)
    restarted = run_visitors_speed(spark, config(tmp_path / "crashes"), available_now=True)
    assert restarted.batches == 1, seed  # batch 2: batch 1 was committed whole at its last point
    assert committed_rows(spark, tmp_path / "crashes") == expected, seed


def test_a_quiet_log_gets_one_heartbeat_that_makes_the_windows_final(spark, tmp_path):
    """Views at 10, 12, 18, 22 and 33 s, one segment each, a second apart; 5 s tumbling windows,
    watermark 5 s behind. The stream, always on, reads them, waits for a quiet second and
    appends one heartbeat."""
    log = EventLog(tmp_path)
    for index, seconds in enumerate((10, 12, 18, 22, 33)):
        log.append([view_line(f"v{index}", seconds, 10_000 + index)], stamp=False)
    config = LabConfig(
        lake=tmp_path,
        table_engine="deltalake",
        window_size=parse_duration("5s"),
        watermark_delay=parse_duration("5s"),
        heartbeat_interval=parse_duration("1s"),
    )
    stop = threading.Event()
    stream = threading.Thread(
        target=run_visitors_speed,
        args=(spark, config),
        kwargs=dict(trigger_interval="0.5 seconds", segments_per_batch=1, stop=stop),  # a micro-batch a segment
    )
    tables = Tables(spark, tmp_path, "deltalake")
    metrics = VISITORS_STREAM_METRICS.name
    stream.start()
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and (not tables.exists(metrics) or tables.read_arrow(metrics).num_rows < 6):
            time.sleep(0.5)
        time.sleep(2)  # two more quiet intervals: nothing left open, so no second heartbeat
    finally:
        stop.set()
        stream.join(timeout=120)
    assert log.last_segment() == 6 and '"heartbeat": true' in log.segment_path(6).read_text()
    assert tables.read_arrow(metrics).sort_by("batch_id")["heartbeats"].to_pylist() == [0, 0, 0, 0, 0, 1]
    windows = {(seconds_of(r["window_start"]), r["status"]) for r in tables.read_arrow("visitors_windows").to_pylist()}
    # without the heartbeat the watermark would stay at 22 - 5 = 17 (the view at 33 is in the
    # last tick); the heartbeat's tick takes it in: 33 - 5 = 28 makes [15, 20) and [20, 25) final
    assert windows == {(10, "final"), (15, "final"), (20, "final"), (30, "open")}
    replay_on_executors(
        spark, config, VISITORS_RULE, "after"
    )  # the heartbeat is in the log: the replay decides the same
    assert stream_rows(spark, tmp_path, replay_prefix("after")) == stream_rows(spark, tmp_path)


def test_the_seen_set_is_written_each_micro_batch_and_expired_entries_leave_it(spark, tmp_path):
    """10 s tumbling windows, the watermark on the largest event time (no delay), state TTL 30 s;
    one segment per micro-batch, ingested at 100, 110 and 140 s. ``visitors_seen`` after each
    batch: per user and URL the latest on-time view's processing time, as of the batch's last line."""
    from deltalake import DeltaTable

    from lklab.pipelines.unique_visitors.tables import VISITORS_SEEN

    log = EventLog(tmp_path)
    log.append(
        [view_line("a", 10, 100), view_line("b", 12, 100, page="cart"), view_line("c", 11, 100, user="u2")], stamp=False
    )
    log.append([view_line("d", 21, 110)], stamp=False)
    log.append([view_line("e", 35, 140, user="u2", page="shop")], stamp=False)
    config = LabConfig(
        lake=tmp_path,
        table_engine="deltalake",
        window_size=parse_duration("10s"),
        watermark_delay=0,
        state_ttl=parse_duration("30s"),
    )
    assert run_visitors_speed(spark, config, available_now=True).batches == 3

    path = str(Tables(spark, tmp_path, "deltalake").path(VISITORS_SEEN.name))
    versions = {int(c["lklab.version"]): c["version"] for c in DeltaTable(path).history() if "lklab.version" in c}
    written = {
        batch: [
            (
                r["user_id"],
                r["url"].rsplit("/", 1)[1],
                seconds_of(r["last_seen"]),
                seconds_of(r["as_of"]),
                r["batch_id"],
            )
            for r in DeltaTable(path, version=version)
            .to_pyarrow_table()
            .sort_by([("user_id", "ascending"), ("url", "ascending")])
            .to_pylist()
        ]
        for batch, version in versions.items()
    }
    assert written == {
        0: [("u1", "cart", 100, 100, 0), ("u1", "home", 100, 100, 0), ("u2", "home", 100, 100, 0)],
        # d (21 s) is a new URL of [20, 30) for u1: home seen again at 110; W* = 12 releases nothing
        1: [("u1", "cart", 100, 110, 1), ("u1", "home", 110, 110, 1), ("u2", "home", 100, 110, 1)],
        # e's line sees W = 21: [10, 20) is released, and at 140 s its entries, last seen at 100 s,
        # are 40 s old (> 30 s): u1's cart and u2's home leave; u1's home stays through [20, 30)
        2: [("u1", "home", 110, 140, 2), ("u2", "shop", 140, 140, 2)],
    }
    entries = (
        Tables(spark, tmp_path, "deltalake")
        .read_arrow(VISITORS_STREAM_METRICS.name)
        .sort_by("batch_id")["state_entries"]
        .to_pylist()
    )
    assert entries == [3, 4, 2]

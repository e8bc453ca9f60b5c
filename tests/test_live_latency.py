"""Live latency: per line, from its segment's publication in the log to its batch's commit."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from lklab.health import live_latency, stream_health
from lklab.line_latency import LineLatency, line_latency, lines_per_segment, with_latency
from lklab.pipelines.billing_windows.speed import run_speed
from lklab.report.commit_time import CommitTime, commit_time
from shared.catalog import LATENCY_COLUMNS, tables_root
from shared.config import load_config
from shared.eventlog import EventLog
from shared.live_latency import LATENCY_FIELDS
from tests.conftest import event_line


def test_the_quantiles_are_nearest_rank_over_lines_weighted_by_their_segment():
    # segment 1: 10 lines waiting 10s; segment 2: 90 lines waiting 5s. The 50th line waits 5s,
    # the 95th 10s.
    assert line_latency({1: 10, 2: 90}, {1: 0.0, 2: 5.0}, 10.0) == LineLatency(10.0, 100, 5.0, 10.0, 10.0)
    # segment 3 is gone from disk: its 6 lines are not measured; of the 4 others the 2nd and the
    # 4th (p50 and p95 of 4 lines) both wait 2s
    assert line_latency({1: 3, 2: 1, 3: 6}, {1: 100.0, 2: 101.5, 3: None}, 102.0) == LineLatency(
        102.0, 4, 2.0, 2.0, 2.0
    )


def test_a_clock_stepped_back_waits_zero_and_a_batch_of_nothing_measures_nothing():
    assert line_latency({7: 2}, {7: 50.25}, 50.0) == LineLatency(50.0, 2, 0.0, 0.0, 0.0)
    assert line_latency({}, {}, 50.0) == LineLatency(50.0, 0, None, None, None)


def test_a_batch_start_is_kept_and_stamped_beside_the_commit():
    latency = line_latency({1: 4}, {1: 10.0}, 12.5, 11.75)
    assert latency == LineLatency(12.5, 4, 2.5, 2.5, 2.5, 11.75)
    row = with_latency(
        pa.table({name: pa.nulls(1, f.type) for name, f in zip(LATENCY_COLUMNS, LATENCY_FIELDS)}), latency
    )
    assert row.to_pylist() == [
        {
            "committed_at": datetime(1970, 1, 1, 0, 0, 12, 500000, tzinfo=UTC),
            "latency_p50_seconds": 2.5,
            "latency_p95_seconds": 2.5,
            "latency_max_seconds": 2.5,
            "started_at": datetime(1970, 1, 1, 0, 0, 11, 750000, tzinfo=UTC),
        }
    ]


def test_the_commit_time_per_configuration_is_nearest_rank_over_the_lines_of_timed_batches():
    at = lambda seconds: datetime(2026, 1, 5, 12, 0, tzinfo=UTC) + timedelta(seconds=seconds)
    batches = [
        (10, at(0), at(0.5)),  # 10 lines waited 0.5 s
        (85, at(1), at(1.25)),  # 85 lines waited 0.25 s
        (5, at(2), at(4)),  # 5 lines waited 2 s
        (0, at(5), at(9)),  # read no line: not counted
        (7, None, at(6)),  # a row from before started_at was recorded: not counted
    ]
    # 100 lines: the 50th waited 0.25 s, the 95th 0.5 s, the longest 2 s
    assert commit_time(batches) == CommitTime(batches=3, lines=100, p50=0.25, p95=0.5, max=2.0)
    assert commit_time(batches[3:]) is None and commit_time([]) is None


def test_lines_are_counted_per_segment():
    parsed = pa.table({"segment": pa.array([4, 4, 5, 4], pa.int64())})
    assert lines_per_segment(parsed) == {4: 3, 5: 1}
    assert lines_per_segment(parsed.slice(0, 0)) == {}


def test_the_window_shows_the_highest_batch_figures_and_counts_the_batches_over_the_limit():
    now = datetime(2026, 1, 5, 12, 0, tzinfo=UTC)
    row = lambda ago, p50, p95, most, took=None: {
        "committed_at": now - timedelta(seconds=ago),
        "latency_p50_seconds": p50,
        "latency_p95_seconds": p95,
        "latency_max_seconds": most,
        "started_at": None if took is None else now - timedelta(seconds=ago + took),
    }
    rows = [
        row(700, 9.0, 90.0, 99.0, 8.0),  # before the 10-minute window
        row(300, 1.0, 2.5, 3.0, 0.25),
        row(60, 1.5, 1.5, 1.5),  # from before started_at was recorded
        row(5, None, None, None, 4.0),  # a batch that read no line
    ]
    seen = live_latency(rows, now.timestamp(), 600.0, 2.0)
    assert (seen.batches, seen.p50_highest, seen.p95_highest, seen.max, seen.over_limit) == (2, 1.5, 2.5, 3.0, 1)
    assert seen.commit_highest == 0.25 and "a batch from its start to its commit: at most 0.25s" in seen.describe()
    assert "p50 at most 1.50s, p95 at most 2.50s" in seen.describe() and "1 over the 2s limit" in seen.describe()


# How much later than the window rows' commit the stamp may be taken: the thread that commits
# them, then stamps, can wait for a core while the other test process runs.
SCHEDULING = 0.5


def _events_seen(path: str) -> int:
    if not DeltaTable.is_deltatable(path):
        return 0
    return sum(DeltaTable(path).to_pyarrow_table(columns=["event_count"])["event_count"].to_pylist())


@pytest.mark.slow
def test_a_minute_of_one_segment_a_second_records_the_waits_the_test_saw(spark, tmp_path):
    """The speed layer runs always on; the test appends one event a second for a minute, takes
    the time before and after each append (the segment is published between them) and polls
    the window rows until the event is counted. Every metrics row's ``committed_at`` and
    latencies must fit those timestamps."""
    lake = tmp_path / "lake"
    log = EventLog(lake)
    config = load_config(None, {"lake": str(lake), "table-engine": "deltalake"}, environ={})
    stop, failure = threading.Event(), []

    def run() -> None:
        try:
            run_speed(spark, config, stop=stop)
        except Exception as err:  # the assertion below reports it
            failure.append(err)

    stream = threading.Thread(target=run, daemon=True)
    stream.start()
    aggregates = str(tables_root(lake) / "speed_aggregates")
    appended: dict[int, tuple[float, float]] = {}  # segment: (before the append, after it)
    seen: dict[int, float] = {}  # segment: when the test first saw its event counted
    order: list[int] = []
    try:
        for number in range(60):
            started = time.time()
            moment = datetime.now(UTC).isoformat().replace("+00:00", "Z")
            segment = log.append([event_line(event_id=f"e-{number}", event_time=moment, ingest_time=None)])
            appended[segment.number] = (started, time.time())
            order.append(segment.number)
            while time.time() < started + 1.0:
                counted = _events_seen(aggregates)
                for index in range(len(seen), counted):
                    seen[order[index]] = time.time()
                time.sleep(0.05)
        deadline = time.time() + 60
        while len(seen) < len(order) and time.time() < deadline and not failure:
            counted = _events_seen(aggregates)
            for index in range(len(seen), counted):
                seen[order[index]] = time.time()
            time.sleep(0.05)
    finally:
        stop.set()
        stream.join(timeout=120)
    assert not failure, failure
    assert len(seen) == 60

    metrics = DeltaTable(str(tables_root(lake) / "stream_metrics")).to_pyarrow_table().to_pylist()
    measured = [row for row in metrics if row["first_segment"] is not None]
    assert sum(row["input_lines"] - row["heartbeats"] for row in measured) == 60
    # a file's times come from the kernel's coarse clock, up to a tick (1-10 ms) behind the one
    # time.time() reads: a segment can look published a few milliseconds before the test began
    # to append it (seen: 3 ms)
    slack = 0.02
    for row in measured:
        committed = row["committed_at"].timestamp()
        first, last = row["first_segment"], row["last_segment"]
        assert row["latency_p50_seconds"] <= row["latency_p95_seconds"] <= row["latency_max_seconds"]
        # the batch committed after its last segment began to be appended, and the test saw its
        # event counted no earlier than the window rows' commit (the stamp follows that commit)
        assert committed >= appended[last][0]
        assert committed <= seen[last] + SCHEDULING
        # the batch began after the query had found its last segment, and before its commit
        assert appended[last][0] - slack <= row["started_at"].timestamp() <= committed
        # the oldest segment waited longest: published between the test's two timestamps
        before, after = appended[first]
        assert committed - after - slack <= row["latency_max_seconds"] <= committed - before + slack
        assert row["latency_max_seconds"] <= seen[first] - before + SCHEDULING
        if first == last:
            assert row["latency_p50_seconds"] == row["latency_p95_seconds"] == row["latency_max_seconds"]

    health = stream_health(lake, max_latency="30s", latency_window="10m")
    latency = health.latency
    assert latency.batches == len(measured)
    assert latency.p95_highest == max(row["latency_p95_seconds"] for row in measured)
    assert latency.max == max(row["latency_max_seconds"] for row in measured)
    took = [(row["committed_at"] - row["started_at"]).total_seconds() for row in measured]
    assert latency.commit_highest == max(took) and 0 < max(took) <= latency.max + slack
    assert (latency.over_limit, health.idle, health.healthy) == (0, True, True)
    # a limit every batch exceeds: shown, but no alarm for a stream that has read everything
    strict = stream_health(lake, max_latency="1ms", latency_window="10m")
    assert (strict.latency.over_limit, strict.healthy) == (len(measured), True)
    assert "no alarm while idle" in strict.describe()
    assert set(LATENCY_COLUMNS) <= set(metrics[0])

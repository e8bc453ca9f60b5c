"""Scenario transcripts through the streaming and the batch path, with exact expected results.

Each ``tests/transcripts/*.yaml`` lists events per log segment (arrival order; ``t`` in seconds
after ``BASE``), the settings, and what must come out: the speed layer's windows with their
status, snapshots of statuses, the late side output, duplicates, late updates, and the batch
truth.

Segment ``k`` is ingested at ``10_000 + k`` seconds: with the default one-second watermark
interval each segment is a tick of its own, so the watermark a segment's lines are judged by is
the largest event time of the segments before it minus the delay. The log ends with a heartbeat
one second after the last segment, so that the clock passes the last tick and the watermark
takes the last segment in: the expected statuses are those once it has. ``after_batch: b``
gives the statuses once the clock has passed segment ``b`` (as of the next micro-batch).
"""

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import pyarrow.compute as pc
import pytest
import yaml

from lklab.pipelines.billing_windows.batch import run_batch
from lklab.pipelines.billing_windows.speed import run_speed
from shared.config import load_config
from shared.eventlog import EventLog
from shared.tables import Tables
from tests.conftest import event_line

BASE = datetime(2026, 1, 5, 10, 0, tzinfo=UTC)
TRANSCRIPTS = sorted(Path(__file__).parent.joinpath("transcripts").glob("*.yaml"))


def at(seconds) -> datetime:
    return BASE + timedelta(seconds=seconds)


def iso(seconds) -> str:
    return at(seconds).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def offset(moment: datetime) -> int:
    return int((moment - BASE).total_seconds())


def write_log(lake: Path, segments: list) -> None:
    """The segments, then a heartbeat one second (one tick) after the last one."""
    log = EventLog(lake)
    for index, events in enumerate(segments):
        lines = [
            event_line(
                event_id=e["id"],
                account_id=e.get("account", "u1"),
                amount=e.get("amount", "1.00"),
                event_time=iso(e["t"]),
                ingest_time=iso(10_000 + index),
            )
            for e in events
        ]
        log.append(lines, stamp=False)
    log.append_heartbeat(at(10_000 + len(segments)))


def window_rows(table, with_status=True):
    rows = []
    for r in table.to_pylist():
        row = [offset(r["window_start"]), offset(r["window_end"]), r["account_id"], r["event_count"], r["amount_total"]]
        rows.append(row + [r["status"]] if with_status else row)
    return sorted(rows)


def expected_windows(rows, with_status=True):
    return sorted([s, e, a, n, Decimal(m)] + ([status[0]] if with_status else []) for s, e, a, n, m, *status in rows)


@pytest.fixture(params=TRANSCRIPTS, ids=[p.stem for p in TRANSCRIPTS])
def transcript(request):
    return yaml.safe_load(request.param.read_text())


def test_transcript_streaming_and_batch(spark, tmp_path, transcript):
    write_log(tmp_path, transcript["segments"])
    config = load_config(
        None, {"lake": str(tmp_path), "table-engine": "deltalake", **transcript["settings"]}, environ={}
    )
    run_speed(spark, config, available_now=True)
    tables, expect = Tables(spark, tmp_path, "deltalake"), transcript["expect"]

    metrics = tables.read_arrow("stream_metrics").sort_by("batch_id")
    assert metrics["batch_id"].to_pylist() == list(range(len(transcript["segments"]) + 1))
    assert window_rows(tables.read_arrow("speed_aggregates")) == expected_windows(expect["windows"])

    late = sorted(
        [
            r["event_id"],
            offset(r["window_start"]),
            offset(r["window_end"]),
            offset(r["watermark"]),
            r["lateness_seconds"],
        ]
        for r in tables.read_arrow("late_events").to_pylist()
    )
    assert late == sorted([i, s, e, w, Decimal(x)] for i, s, e, w, x in expect["late"])
    duplicates = (
        tables.read_arrow("duplicate_events")["event_id"].to_pylist() if tables.exists("duplicate_events") else []
    )
    assert sorted(duplicates) == sorted(expect.get("duplicates", []))
    assert sum(metrics["late_updates"].to_pylist()) == expect["late_updates"]
    lines = sum(len(s) for s in transcript["segments"]) + 1
    counted = [sum(metrics[c].to_pylist()) for c in ("on_time", "late", "duplicates", "dead_letters", "heartbeats")]
    assert sum(metrics["input_lines"].to_pylist()) == lines == sum(counted)

    for batch, statuses in expect.get("after_batch", {}).items():
        snapshot = tables.as_of("speed_aggregates", batch + 1)
        for status, windows in statuses.items():
            for start, end in windows:
                chosen = snapshot.filter(pc.field("window_start") == at(start)).filter(
                    pc.field("window_end") == at(end)
                )
                assert chosen.num_rows and set(chosen["status"].to_pylist()) == {status}, (batch, start, end, status)

    run_batch(spark, config)
    assert window_rows(tables.read_arrow("batch_truth"), with_status=False) == expected_windows(
        expect["truth"], with_status=False
    )

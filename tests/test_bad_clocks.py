"""A line dated far ahead of its arrival is a dead letter, and the stream goes on as if it had
never come.

One hand-made log, run by the real speed layer and by the Kappa replay twice: as written, and
with a line dated 2099 at the end of its second segment (arriving with that segment, so the
log's clock is the same). Accepted, that line would move the watermark to 2099 for good and
every later event would be late; the health check would see a watermark ahead of arrival.
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from lklab.pipelines.billing_windows.replay import run_replay
from lklab.pipelines.billing_windows.speed import run_speed
from shared.config import load_config
from shared.eventlog import EventLog
from shared.tables import Tables
from tests.conftest import event_line

BASE = datetime(2026, 1, 5, 10, 0, tzinfo=UTC)
SETTINGS = {"window-kind": "tumbling", "window-size": "10s", "watermark-delay": "5s"}
# (event id, event time in seconds after BASE); segment k arrives at 10,000 + k seconds
SEGMENTS = [
    [("a", 10), ("b", 12)],
    [("c", 25)],
    [("d", 31), ("e", 8)],  # e: its window [0, 10) closed when the watermark reached 20
    [("f", 40)],
]
FUTURE = event_line(
    event_id="from-2099", account_id="u1", event_time="2099-01-01T00:00:00Z", ingest_time="2026-01-05T12:46:41Z"
)
WINDOW_TABLES = ("speed_aggregates", "late_events", "duplicate_events")


def iso(seconds: float) -> str:
    return (BASE + timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


def write_log(lake: Path, *, future: bool) -> None:
    log = EventLog(lake)
    for index, events in enumerate(SEGMENTS):
        lines = [
            event_line(event_id=i, account_id="u1", event_time=iso(t), ingest_time=iso(10_000 + index))
            for i, t in events
        ]
        if future and index == 1:
            lines.append(FUTURE)
        log.append(lines, stamp=False)


def rows(tables: Tables, name: str) -> list[dict]:
    if not tables.exists(name):
        return []
    return sorted(tables.read_arrow(name).to_pylist(), key=lambda row: json.dumps(row, default=str, sort_keys=True))


@pytest.fixture(scope="module")
def lakes(spark, tmp_path_factory) -> dict[str, Path]:
    """The log with and without the 2099 line, each after the speed layer and a replay."""
    made = {}
    for name, future in (("without", False), ("with", True)):
        lake = tmp_path_factory.mktemp(f"clock-{name}")
        write_log(lake, future=future)
        config = load_config(None, {"lake": str(lake), "table-engine": "deltalake", **SETTINGS}, environ={})
        run_speed(spark, config, available_now=True)
        run_replay(spark, config, "replayed")
        made[name] = lake
    return made


def test_a_2099_line_is_dead_lettered_and_every_other_line_goes_where_it_went_without_it(spark, lakes):
    clean, dirty = (Tables(spark, lakes[name], "deltalake") for name in ("without", "with"))
    for prefix in ("", "kappa/replayed/"):
        assert rows(clean, prefix + "dead_letter") == []
        assert [
            (r["segment"], r["line_number"], r["reject_reason"], r["reject_detail"], r["raw_line"])
            for r in rows(dirty, prefix + "dead_letter")
        ] == [
            (
                2,
                2,
                "event_time_in_future",
                "event_time 2099-01-01T00:00:00Z is more than 5m (max-clock-skew) ahead of ingest_time 2026-01-05T12:46:41Z",
                FUTURE,
            ),
        ]
        for name in WINDOW_TABLES:
            assert rows(dirty, prefix + name) == rows(clean, prefix + name), prefix + name
        # e is late in both: the watermark was 20 s when it came, not 2099
        assert [(r["event_id"], r["lateness_seconds"]) for r in rows(dirty, prefix + "late_events")] == [("e", 12)]
        metrics = {
            name: rows(tables, prefix + "stream_metrics") for name, tables in (("clean", clean), ("dirty", dirty))
        }
        watermarks = lambda batches: [
            (r["batch_id"], r["watermark"], r["next_watermark"], r["max_event_time"], r["watermark_lag_seconds"])
            for r in batches
        ]
        assert watermarks(metrics["dirty"]) == watermarks(metrics["clean"])
        assert [(r["input_lines"], r["on_time"], r["late"], r["dead_letters"]) for r in metrics["dirty"]] == [
            (2, 2, 0, 0),
            (2, 1, 0, 1),
            (2, 1, 1, 0),
            (1, 1, 0, 0),
        ]


def test_health_stays_good_after_a_2099_line(lakes, capsys):
    """``lklab health`` as ``lklab.cli.main`` called in this process (no ``LKLAB_`` setting in
    its environment), instead of an ``lklab`` process: its verdict is what is checked."""
    from lklab.cli import main
    from tests.conftest import cli_in_this_process

    capsys.readouterr()
    with cli_in_this_process():
        for name in [name for name in os.environ if name.startswith("LKLAB_")]:
            del os.environ[name]
        code = main(["health", "--lake", str(lakes["with"]), "--max-watermark-lag", "1d", "--json"])
    out, err = capsys.readouterr()
    assert code == 0, out + err
    health = json.loads(out)
    # the last batch's lag: its arrival (10,003 s) minus the watermark it hands on, 31 - 5 s (the
    # events of segments 1-3; its own event counts from the next tick on)
    assert (health["healthy"], health["reasons"], health["watermark_lag_seconds"]) == (True, [], 10_003 - 26)

"""Batch recompute by day: the recorded log position makes reruns repeatable; --refresh moves it."""

from __future__ import annotations

from datetime import date
from decimal import Decimal

import pytest

from lklab.pipelines.billing_windows.batch import run_batch
from shared.batch_runs import PositionError
from shared.config import load_config
from shared.eventlog import EventLog
from shared.partitions import DayRange
from shared.tables import Tables
from tests.conftest import event_line


def append(lake, *events):
    EventLog(lake).append(
        [
            event_line(event_id=i, account_id="u1", amount=a, event_time=t, ingest_time="2026-01-07T00:00:00Z")
            for i, t, a in events
        ],
        stamp=False,
    )


def truth(tables):
    return sorted(
        (r["window_start"].isoformat(), r["event_count"], r["amount_total"])
        for r in tables.read_arrow("batch_truth").to_pylist()
    )


def test_days_reruns_and_refresh(spark, tmp_path):
    config = load_config(None, {"lake": str(tmp_path), "table-engine": "deltalake", "window-size": "1m"}, environ={})
    tables = Tables(spark, tmp_path, "deltalake")
    append(tmp_path, ("e1", "2026-01-05T10:00:00Z", "1.00"), ("e2", "2026-01-06T10:00:00Z", "2.00"))
    append(tmp_path, ("e3", "2026-01-05T10:00:30Z", "4.00"), ("e1", "2026-01-05T10:00:00Z", "1.00"))
    day5, day6 = DayRange.of("2026-01-05"), DayRange.of("2026-01-06")

    first = run_batch(spark, config, day5)
    assert (first.last_segment, first.lines, first.events, first.duplicates, first.windows) == (2, 4, 3, 1, 1)
    assert truth(tables) == [("2026-01-05T10:00:00+00:00", 2, Decimal("5"))]
    run_batch(spark, config, day6)
    assert truth(tables) == [
        ("2026-01-05T10:00:00+00:00", 2, Decimal("5")),
        ("2026-01-06T10:00:00+00:00", 1, Decimal("2")),
    ]

    append(tmp_path, ("e4", "2026-01-05T10:00:10Z", "8.00"))  # arrives after the day's run
    before = tables.read_arrow("batch_truth").to_pylist()
    rerun = run_batch(spark, config, day5)
    assert rerun.last_segment == 2, "a rerun reads the position recorded for the day"
    assert sorted(map(str, tables.read_arrow("batch_truth").to_pylist())) == sorted(map(str, before))

    refreshed = run_batch(spark, config, day5, refresh=True)
    assert (refreshed.last_segment, refreshed.lines) == (3, 5)
    assert truth(tables) == [
        ("2026-01-05T10:00:00+00:00", 3, Decimal("13")),
        ("2026-01-06T10:00:00+00:00", 1, Decimal("2")),
    ]

    with pytest.raises(PositionError, match=r"2026-01-05: segment 3, 2026-01-06: segment 2"):
        run_batch(spark, config, DayRange.of(None, "2026-01-05", "2026-01-06"))

    runs = sorted(tables.read_arrow("batch_runs").to_pylist(), key=lambda r: r["run_number"])
    assert [(r["run_number"], r["date_from"], r["last_segment"]) for r in runs] == [
        (1, date(2026, 1, 5), 2),
        (2, date(2026, 1, 6), 2),
        (3, date(2026, 1, 5), 2),
        (4, date(2026, 1, 5), 3),
    ]
    assert all(r["lines"] == r["events"] + r["duplicates"] + r["dead_letters"] for r in runs)
    assert all(r["wall_seconds"] > 0 and r["cpu_seconds"] > 0 for r in runs)

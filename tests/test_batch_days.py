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
    # segments 1..2 are known from batch_events: the refresh reads segment 3, one line
    assert (refreshed.first_segment, refreshed.last_segment, refreshed.lines) == (3, 3, 1)
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


def _segment(lake, ingest_time, *lines):
    EventLog(lake).append(
        [line if isinstance(line, str) else event_line(**{"ingest_time": ingest_time, **line}) for line in lines],
        stamp=False,
    )


def _nightly_log(lake, nights):
    """Two nights of a hand-made log; ``nights[0]()`` runs after the first, ``nights[1]()`` after the second."""
    _segment(
        lake,
        "2026-01-05T12:00:00Z",
        dict(event_id="e1", amount="10.00", event_time="2026-01-05T10:00:00Z"),
        # a day-6 event in a day-5 segment: within max-clock-skew (5m) of its ingest time
        dict(event_id="e2", amount="2.50", event_time="2026-01-06T00:02:00Z", ingest_time="2026-01-05T23:59:00Z"),
        dict(event_id="e3", account_id="acct-2", amount="7.00", event_time="2026-01-05T11:00:00Z"),
    )
    _segment(lake, "2026-01-05T23:00:00Z", dict(event_id="e7", amount="1.00", event_time="2026-01-05T22:59:00Z"))
    nights[0]()
    _segment(
        lake,
        "2026-01-06T01:00:00Z",
        dict(event_id="e1", amount="10.00", event_time="2026-01-05T10:00:00Z"),  # a retry of a day-5 event
        # the id reused, another day and amount: a conflicting duplicate, in no day-6 window
        dict(event_id="e3", account_id="acct-2", amount="9.00", event_time="2026-01-06T00:30:00Z"),
        dict(event_id="e4", amount="4.00", event_time="2026-01-05T23:59:30Z"),  # late: a day-5 event
        dict(event_id="e5", amount="0.25", event_time="2026-01-06T00:02:10Z"),
        event_line(event_id="e8", amount=12.5, ingest_time="2026-01-06T01:00:00Z"),  # a JSON number: dead letter
    )
    _segment(
        lake,
        "2026-01-06T02:00:00Z",
        dict(event_id="e5", amount="0.25", event_time="2026-01-06T00:02:10Z"),  # a retry within the night
        dict(event_id="e6", account_id="acct-2", amount="3.00", event_time="2026-01-06T01:00:00Z"),
    )
    nights[1]()


def _windows(tables, day):
    rows = DayRange.of(day).select(tables.read_arrow("batch_truth")).to_pylist()
    return sorted((r["account_id"], r["window_start"].isoformat(), r["event_count"], r["amount_total"]) for r in rows)


def _line_rows(tables):
    duplicates = [
        (
            r["segment"],
            r["line_number"],
            r["event_id"],
            r["first_segment"],
            r["first_line_number"],
            r["payload_conflict"],
        )
        for r in tables.read_arrow("batch_duplicates").to_pylist()
    ]
    dead = [
        (r["segment"], r["line_number"], r["reject_reason"]) for r in tables.read_arrow("batch_dead_letter").to_pylist()
    ]
    return sorted(duplicates), sorted(dead)


def test_a_night_reads_its_own_segments_and_agrees_with_the_whole_log(spark, tmp_path):
    settings = {"table-engine": "deltalake", "window-size": "1m"}
    nightly, whole = tmp_path / "nightly", tmp_path / "whole"
    configs = {lake: load_config(None, {"lake": str(lake), **settings}, environ={}) for lake in (nightly, whole)}
    runs = []
    day5, day6 = DayRange.of("2026-01-05"), DayRange.of("2026-01-06")
    _nightly_log(
        nightly,
        [
            lambda: runs.append(run_batch(spark, configs[nightly], day5)),
            lambda: runs.append(run_batch(spark, configs[nightly], day6)),
        ],
    )
    _nightly_log(whole, [lambda: None, lambda: runs.append(run_batch(spark, configs[whole]))])
    runs.append(run_batch(spark, configs[nightly], day5, refresh=True))  # day 5 again, with its late event
    first_night, second_night, everything, refreshed = runs

    assert (first_night.first_segment, first_night.last_segment, first_night.lines) == (1, 2, 4)
    # the second night reads segments 3..4 only: 7 lines = 3 events + 3 duplicates + 1 dead letter
    assert (second_night.first_segment, second_night.last_segment) == (3, 4)
    assert (second_night.lines, second_night.events, second_night.duplicates, second_night.dead_letters) == (7, 3, 3, 1)
    assert (everything.first_segment, everything.lines, everything.events) == (1, 11, 7)
    assert (refreshed.first_segment, refreshed.last_segment, refreshed.lines) == (5, 4, 0)

    nightly_tables, whole_tables = Tables(spark, nightly, "deltalake"), Tables(spark, whole, "deltalake")
    assert _windows(nightly_tables, "2026-01-06") == [
        ("acct-1", "2026-01-06T00:02:00+00:00", 2, Decimal("2.75")),  # e2 (read in night 1) and e5, once
        ("acct-2", "2026-01-06T01:00:00+00:00", 1, Decimal("3")),  # e6; e3's second copy is a duplicate
    ]
    assert _windows(nightly_tables, "2026-01-05") == [
        ("acct-1", "2026-01-05T10:00:00+00:00", 1, Decimal("10")),  # e1 once
        ("acct-1", "2026-01-05T22:59:00+00:00", 1, Decimal("1")),
        ("acct-1", "2026-01-05T23:59:00+00:00", 1, Decimal("4")),  # e4, late, found by the refresh
        ("acct-2", "2026-01-05T11:00:00+00:00", 1, Decimal("7")),  # e3's first copy
    ]
    for day in ("2026-01-05", "2026-01-06"):
        assert _windows(nightly_tables, day) == _windows(whole_tables, day)
    # whole_log reads from segment 1 again, whatever batch_events holds, to the same rows
    again = run_batch(spark, configs[nightly], DayRange(), refresh=True, whole_log=True)
    assert (again.first_segment, again.last_segment, again.lines, again.events) == (1, 4, 11, 7)
    for day in ("2026-01-05", "2026-01-06"):
        assert _windows(nightly_tables, day) == _windows(whole_tables, day)
    assert (
        _line_rows(nightly_tables)
        == _line_rows(whole_tables)
        == (
            [(3, 1, "e1", 1, 1, False), (3, 2, "e3", 1, 3, True), (4, 1, "e5", 3, 4, False)],
            [(3, 5, "wrong_type")],
        )
    )

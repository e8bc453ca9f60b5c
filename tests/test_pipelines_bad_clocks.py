"""A line dated 2099 is a dead letter in the ``unique_visitors`` and ``order_payments`` streams
too, and each goes on as if it had never come (billing's: ``tests/test_bad_clocks.py``).

Per pipeline, one tiny hand-made log run by its real speed layer twice: as written, and with a
line dated 2099 at the end of its second segment (arriving with that segment, so the log's clock
is the same). Accepted, that line would move the watermark to 2099 for good and every later
line would be late.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

from lklab.pipelines.order_payments.stream import run_payments_speed
from lklab.pipelines.order_payments.tables import (
    PAYMENTS_DEAD_LETTER,
    PAYMENTS_LATE_EVENTS,
    PAYMENTS_MATCHED,
    PAYMENTS_STREAM_METRICS,
    PAYMENTS_TABLES,
)
from lklab.pipelines.unique_visitors.speed import run_visitors_speed
from lklab.pipelines.unique_visitors.tables import (
    VISITORS_DEAD_LETTER,
    VISITORS_LATE_EVENTS,
    VISITORS_SPEED_TABLES,
    VISITORS_STREAM_METRICS,
)
from shared.config import load_config
from shared.eventlog import EventLog
from shared.tables import Tables

BASE = datetime(2026, 1, 5, 10, 0, tzinfo=UTC)
FUTURE_DETAIL = (
    "event_time 2099-01-01T00:00:00Z is more than 5m (max-clock-skew) ahead of ingest_time 2026-01-05T12:46:41Z"
)


def iso(seconds: float) -> str:
    return (BASE + timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


def view(event_id: str, seconds: int, segment: int) -> str:
    return json.dumps(
        {
            "event_id": event_id,
            "user_id": "u1",
            "url": f"https://shop.example/{event_id}",
            "event_time": iso(seconds),
            "ingest_time": iso(10_000 + segment),
        }
    )


def order(event_id: str, kind: str, order_id: str, seconds: int, segment: int) -> str:
    return json.dumps(
        {
            "event_id": event_id,
            "kind": kind,
            "order_id": order_id,
            "amount": "10.00",
            "currency": "EUR",
            "event_time": iso(seconds),
            "ingest_time": iso(10_000 + segment),
        }
    )


def future(line: str) -> str:
    """``line`` dated 2099, arriving with the second segment (ingest 10,001 s: 12:46:41)."""
    return json.dumps(
        {**json.loads(line), "event_id": "from-2099", "event_time": "2099-01-01T00:00:00Z", "ingest_time": iso(10_001)}
    )


def write_log(lake: Path, segments: list[list[str]], late_line: str | None) -> None:
    log = EventLog(lake)
    for index, lines in enumerate(segments):
        log.append(lines + ([late_line] if late_line and index == 1 else []), stamp=False)


def rows(tables: Tables, name: str) -> list[dict]:
    return sorted(tables.read_arrow(name).to_pylist(), key=lambda row: json.dumps(row, default=str, sort_keys=True))


def both_runs(
    spark, tmp_path: Path, segments: list[list[str]], line: str, run, settings: dict
) -> tuple[Tables, Tables]:
    """The stream over the log without and with the 2099 line, two segments per micro-batch."""
    runs = []
    for name, late_line in (("without", None), ("with", line)):
        lake = tmp_path / name
        write_log(lake, segments, late_line)
        run(
            spark,
            load_config(None, {"lake": str(lake), "table-engine": "deltalake", **settings}, environ={}),
            available_now=True,
            segments_per_batch=2,
        )
        runs.append(Tables(spark, lake, "deltalake"))
    return runs[0], runs[1]


def only_the_2099_line_differs(clean: Tables, dirty: Tables, line: str, tables, dead_letter, metrics) -> list[dict]:
    """The 2099 line is the one dead letter, every other table of the stream has the rows of the
    log without it, and so has every micro-batch's watermark; the dirty run's metrics rows."""
    assert rows(clean, dead_letter.name) == []
    assert [
        (r["segment"], r["line_number"], r["reject_reason"], r["reject_detail"], r["raw_line"])
        for r in rows(dirty, dead_letter.name)
    ] == [
        (2, 2, "event_time_in_future", FUTURE_DETAIL, line),
    ]
    for table in tables:
        if table not in (dead_letter, metrics):
            assert rows(dirty, table.name) == rows(clean, table.name), table.name
    marks = lambda run: [
        {k: v for k, v in r.items() if "watermark" in k or k == "batch_id"} for r in rows(run, metrics.name)
    ]
    assert marks(dirty) == marks(clean)
    return rows(dirty, metrics.name)


def test_a_2099_page_view_is_dead_lettered_and_every_other_line_goes_where_it_went_without_it(spark, tmp_path):
    # 10 s windows, the watermark 5 s behind: e (8 s) is late after c (25 s) moved W to 20
    segments = [
        [view("a", 10, 1), view("b", 12, 1)],
        [view("c", 25, 2)],
        [view("d", 31, 3), view("e", 8, 3)],
        [view("f", 40, 4)],
    ]
    line = future(view("x", 0, 2))
    clean, dirty = both_runs(
        spark, tmp_path, segments, line, run_visitors_speed, {"window-size": "10s", "watermark-delay": "5s"}
    )
    metrics = only_the_2099_line_differs(
        clean, dirty, line, VISITORS_SPEED_TABLES, VISITORS_DEAD_LETTER, VISITORS_STREAM_METRICS
    )
    assert [(r["event_id"], r["lateness_seconds"]) for r in rows(dirty, VISITORS_LATE_EVENTS.name)] == [("e", 12)]
    assert [(r["input_lines"], r["views"], r["dead_letters"]) for r in metrics] == [(4, 3, 1), (3, 3, 0)]


def test_a_2099_order_is_dead_lettered_and_every_other_line_goes_where_it_went_without_it(spark, tmp_path):
    # a payment matches up to 5 s after its order, the watermark 5 s behind: pX (8 s) is late
    # once W is 25 - 5 = 20; the 2099 order would have made every later line late
    segments = [
        [order("o1", "order", "A", 10, 1), order("p1", "payment", "A", 12, 1)],
        [order("o2", "order", "B", 25, 2)],
        [order("p2", "payment", "B", 28, 3), order("pX", "payment", "X", 8, 3)],
        [order("o3", "order", "C", 40, 4)],
    ]
    line = future(order("x", "order", "B", 0, 2))
    clean, dirty = both_runs(
        spark, tmp_path, segments, line, run_payments_speed, {"join-bound": "5s", "watermark-delay": "5s"}
    )
    only_the_2099_line_differs(clean, dirty, line, PAYMENTS_TABLES, PAYMENTS_DEAD_LETTER, PAYMENTS_STREAM_METRICS)
    assert [(r["order_event_id"], r["payment_event_id"]) for r in rows(dirty, PAYMENTS_MATCHED.name)] == [
        ("o1", "p1"),
        ("o2", "p2"),
    ]
    assert [r["event_id"] for r in rows(dirty, PAYMENTS_LATE_EVENTS.name)] == ["pX"]

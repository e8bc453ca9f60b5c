"""A stamped segment keeps its lines as sent, and parses as the same lines stamped inside did.

Before segments had a header, ``lklab ingest`` wrote ``, "ingest_time": "<stamp>"`` into every
JSON object lacking one (``stamped_inside`` below is that writer). A lake of such segments and
a lake of the same lines appended with a header must give every parser the same rows, ``raw_line``
aside: the old lake's holds the stamp, the new one's the line as sent.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from lklab.pipelines.order_payments.parse import parse_order_events
from lklab.pipelines.unique_visitors.parse import parse_page_views
from shared.eventlog import EventLog, format_timestamp
from shared.log_source import parsed_log, raw_log
from tests.test_parse_equivalence import edge_lines

APPENDED = datetime(2026, 1, 5, 10, 0, 30, tzinfo=UTC)
STAMP = format_timestamp(APPENDED)
COLLECTED = APPENDED.replace(tzinfo=None)  # as a UTC session collects it
TEXT_REASONS = {"invalid_utf8", "line_too_long"}  # the two whose raw_line is not the line as it stands


def stamped_inside(line: bytes, stamp: str) -> bytes:
    """A line as the log's writer stored it before segments had a header."""
    try:
        value = json.loads(line.decode("utf-8"))
    except (ValueError, UnicodeDecodeError):
        return line
    if not isinstance(value, dict) or "ingest_time" in value:
        return line
    body = line.rstrip()
    if not body.endswith(b"}"):
        return line
    separator = b", " if value else b""
    return body[:-1].rstrip() + separator + b'"ingest_time": "' + stamp.encode() + b'"}'


def view(**fields) -> bytes:
    base = {"event_id": "v", "user_id": "u", "url": "https://shop.example/", "event_time": "2026-01-05T10:00:00Z"}
    return json.dumps({k: v for k, v in {**base, **fields}.items() if v is not None}).encode()


def order(**fields) -> bytes:
    base = {
        "event_id": "o",
        "kind": "order",
        "order_id": "ord-1",
        "amount": "40.00",
        "currency": "EUR",
        "event_time": "2026-01-05T10:00:00Z",
    }
    return json.dumps({k: v for k, v in {**base, **fields}.items() if v is not None}).encode()


CLOCK_EDGES = [
    b'{"heartbeat": true}',  # a heartbeat dated by its append
    b'{"heartbeat": true, "ingest_time": null}',
    b"{}",
    b'  {"event_time": "2099-01-01T00:00:00Z"}  ',
    b'{"ingest_time": "not a time"}',
]


def two_lakes(tmp_path, lines: list[bytes]) -> tuple[str, str]:
    """The lines in one segment: stamped inside (the old format) and appended with a header."""
    old, new = tmp_path / "old", tmp_path / "new"
    EventLog(old).append([stamped_inside(line, STAMP) for line in lines], stamp=False)
    EventLog(new).append(lines, APPENDED)
    assert EventLog(new).read_lines(EventLog(new).segment_path(1)) == [
        line.decode("utf-8", "backslashreplace") for line in lines
    ]
    return str(old), str(new)


def rows(frame) -> list[dict]:
    return [row.asDict() for row in frame.orderBy("line_number").collect()]


def assert_same_but_the_raw_lines(old: list[dict], new: list[dict], lines: list[bytes]) -> None:
    assert len(old) == len(new) == len(lines)
    for before, after, sent in zip(old, new, lines):
        assert {**before, "raw_line": None} == {**after, "raw_line": None}, sent
        if after["reject_reason"] is not None and after["reject_reason"] not in TEXT_REASONS:
            assert after["raw_line"].encode() == sent


def test_billing_parses_a_stamped_segment_as_the_lines_stamped_inside(spark, tmp_path):
    lines = [line.encode() for line in edge_lines()] + CLOCK_EDGES
    lines = [line for line in lines if b"\n" not in line and b"\r" not in line]
    old, new = two_lakes(tmp_path, lines)
    before, after = rows(parsed_log(spark, old, 1)), rows(parsed_log(spark, new, 1))
    assert_same_but_the_raw_lines(before, after, lines)
    assert {row["reject_reason"] for row in after} >= {"event_time_in_future", "invalid_ingest_time", None}
    heartbeat = after[len(lines) - len(CLOCK_EDGES)]
    assert heartbeat["heartbeat"] and heartbeat["ingest_time"] == COLLECTED


@pytest.mark.parametrize(
    ("parse", "line"),
    [(parse_page_views, view), (parse_order_events, order)],
    ids=["visitors (Spark)", "order_payments (Python)"],
)
def test_every_parser_takes_the_segments_stamp_where_a_line_has_no_ingest_time(spark, tmp_path, parse, line):
    lines = [
        line(),
        line(ingest_time="2026-01-05T09:59:00Z"),
        line(event_time="2026-01-05T10:10:00Z"),  # ahead of the stamp by more than the skew
        line(event_time="2026-01-05T10:10:00Z", ingest_time="2026-01-05T10:09:59Z"),
        line(ingest_time=None, event_id=""),
        *CLOCK_EDGES,
    ]
    old, new = two_lakes(tmp_path, lines)
    before, after = (rows(raw_log(spark, lake, 1).transform(parse)) for lake in (old, new))
    assert_same_but_the_raw_lines(before, after, lines)
    assert [row["reject_reason"] for row in after[:4]] == [None, None, "event_time_in_future", None]
    assert [row["ingest_time"] for row in after[:2]] == [COLLECTED, datetime(2026, 1, 5, 9, 59)]
    assert after[2]["raw_line"].encode() == lines[2]

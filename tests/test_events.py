"""Parsing and validation: every rejection reason, with exact expected rows."""

import base64
import json
from datetime import datetime
from decimal import Decimal

from shared.events import REJECT_REASONS, parse_events
from tests.conftest import event_line, read_as_the_log_does

CASES = [
    ("", "empty_line", None),
    ("   ", "empty_line", None),
    ('{"event_id": "a", ', "not_json", None),
    ("[1, 2]", "not_an_object", None),
    ('"text"', "not_an_object", None),
    (' \t "{ not an object }"', "not_an_object", None),
    (event_line(currency=None), "missing_field", "currency"),
    (event_line(event_id=""), "missing_field", "event_id"),
    (json.dumps({**json.loads(event_line()), "account_id": None}), "missing_field", "account_id"),
    (event_line(account_id="   "), "missing_field", "account_id"),
    (json.dumps({**json.loads(event_line()), "amount": 10.5}), "wrong_type", "amount"),
    (json.dumps({**json.loads(event_line()), "event_id": 42}), "wrong_type", "event_id"),
    (event_line(event_type="chargeback"), "invalid_event_type", "event_type"),
    (event_line(amount="12.3.4"), "invalid_amount", "amount"),
    (event_line(amount="1e3"), "invalid_amount", "amount"),
    (event_line(amount="1.1234567"), "amount_out_of_range", "amount"),
    (event_line(amount="123456789012345"), "amount_out_of_range", "amount"),
    (event_line(amount="-1.00"), "amount_sign", "amount"),
    (event_line(amount="0"), "amount_sign", "amount"),
    (event_line(event_type="refund", amount="5.00"), "amount_sign", "amount"),
    (event_line(currency="usd"), "invalid_currency", "currency"),
    (event_line(currency="XYZ"), "invalid_currency", "currency"),
    (event_line(event_time="2026-01-05T10:00:00"), "invalid_event_time", "event_time"),
    (event_line(event_time="2026-02-30T10:00:00Z"), "invalid_event_time", "event_time"),
    (event_line(event_time="2026-01-05"), "invalid_event_time", "event_time"),
    (event_line(ingest_time="yesterday"), "invalid_ingest_time", "ingest_time"),
    (json.dumps({**json.loads(event_line()), "ingest_time": 5}), "invalid_ingest_time", "ingest_time"),
    # Spark's parser refuses a repeated key, others keep the first or the last value: name it
    ('{"event_id": "a", "event_id": "b", "account_id": "acct-1"}', "duplicate_key", "event_id"),
    (
        event_line().replace('"currency": "USD"', '"currency": "USD", "\\u0063urrency": "EUR"'),
        "duplicate_key",
        "currency",
    ),
    ('{"heartbeat": true, "heartbeat": true, "ingest_time": "2026-01-05T10:00:02Z"}', "duplicate_key", "heartbeat"),
    (
        event_line(event_time="2099-01-01T00:00:00Z"),
        "event_time_in_future",
        "event_time 2099-01-01T00:00:00Z is more than 5m (max-clock-skew) ahead of ingest_time 2026-01-05T10:00:01Z",
    ),
]

# Lines only a reader can hand over: (the line as read, reason, detail, raw_line of the dead letter)
NOT_UTF8 = b'{"event_id": "e\xff", "account_id": "acct-1"}'
LONG = b'{"event_id": "' + b"x" * 3000 + b'"}'
EUROS = "\u20ac".encode() * 400  # 1,200 bytes: the kept 1,024 end inside the 342nd euro sign
BYTE_CASES = [
    (NOT_UTF8, "invalid_utf8", "raw_line holds the line's 42 bytes in base64", base64.b64encode(NOT_UTF8).decode()),
    (
        b"  \xc0\xaf",
        "invalid_utf8",
        "raw_line holds the line's 4 bytes in base64",
        "ICDArw==",
    ),  # an overlong '/' is no blank
    (read_as_the_log_does(LONG, 1024)[0], "line_too_long", "3016 bytes", LONG[:1024].decode()),
    (read_as_the_log_does(EUROS, 1024)[0], "line_too_long", "1200 bytes", "\u20ac" * 341 + "\ufffd"),
]


def test_every_reason_is_exercised():
    assert {reason for _, reason, _ in CASES} | {reason for _, reason, _, _ in BYTE_CASES} == set(REJECT_REASONS)


def test_each_bad_line_gets_its_reason(lines_frame):
    rows = lines_frame([line for line, _, _ in CASES]).transform(parse_events).orderBy("line_number").collect()
    got = [(row.line_number, row.reject_reason, row.reject_detail) for row in rows]
    expected = [(number, reason, detail) for number, (_, reason, detail) in enumerate(CASES, start=1)]
    assert got == expected
    assert [row.raw_line for row in rows] == [line for line, _, _ in CASES]


def test_lines_that_are_not_text_become_text_dead_letters(lines_frame):
    rows = lines_frame([line for line, _, _, _ in BYTE_CASES]).transform(parse_events).orderBy("line_number").collect()
    assert [(row.reject_reason, row.reject_detail, row.raw_line) for row in rows] == [case[1:] for case in BYTE_CASES]
    assert base64.b64decode(rows[0].raw_line) == NOT_UTF8  # every byte, verbatim
    assert {(row.event_id, row.account_id, row.ingest_time) for row in rows} == {(None, None, None)}


def test_an_event_time_ahead_of_arrival_by_more_than_the_skew_is_a_dead_letter(lines_frame):
    lines = [
        event_line(event_time="2026-01-05T10:05:01Z"),  # exactly 5m after its ingest time: accepted
        event_line(event_time="2026-01-05T10:05:01.000001Z"),  # one microsecond more
        event_line(event_time="2026-01-05T12:05:01+02:00"),  # the same instant as the first, written with an offset
        event_line(event_time="2099-01-01T00:00:00Z", ingest_time=None),  # nothing to compare with
        '{"heartbeat": true, "ingest_time": "2026-01-05T10:00:02Z"}',
    ]
    verdicts = lambda **skew: [
        (row.reject_reason, row.reject_detail)
        for row in lines_frame(lines).transform(parse_events, **skew).orderBy("line_number").collect()
    ]
    future = "event_time 2026-01-05T10:05:01.000001Z is more than 5m (max-clock-skew) ahead of ingest_time 2026-01-05T10:00:01Z"
    assert verdicts() == [(None, None), ("event_time_in_future", future), (None, None), (None, None), (None, None)]
    strict = verdicts(max_clock_skew=0)
    assert [reason for reason, _ in strict] == ["event_time_in_future"] * 3 + [None, None]
    assert (
        strict[2][1]
        == "event_time 2026-01-05T12:05:01+02:00 is more than 0s (max-clock-skew) ahead of ingest_time 2026-01-05T10:00:01Z"
    )


def test_valid_lines_are_typed_exactly(lines_frame):
    lines = [
        event_line(event_time="2026-01-05T12:30:00.250+02:00", amount="0.000001", ingest_time="2026-01-05T10:30:01Z"),
        event_line(event_id="e-2", event_type="refund", amount="-12.34", currency="JPY", ingest_time=None),
        event_line(event_id="e-3", event_type="adjustment", amount="-99999999999999.999999", currency="KWD"),
    ]
    rows = lines_frame(lines, segment=7).transform(parse_events).orderBy("line_number").collect()
    assert [row.reject_reason for row in rows] == [None, None, None]
    assert rows[0].event_time == datetime(2026, 1, 5, 10, 30, 0, 250_000)
    assert rows[0].amount == Decimal("0.000001")
    assert rows[1].amount == Decimal("-12.34") and rows[1].ingest_time is None
    assert rows[2].amount == Decimal("-99999999999999.999999")
    assert [(row.segment, row.line_number) for row in rows] == [(7, 1), (7, 2), (7, 3)]


def test_whitespace_around_an_object_is_allowed(lines_frame):
    rows = (
        lines_frame([" \t" + event_line(), "\n" + event_line(event_id="e-2") + "  "]).transform(parse_events).collect()
    )
    assert [row.reject_reason for row in rows] == [None, None]


def test_adjustments_may_be_negative_and_extra_fields_are_ignored(lines_frame):
    line = json.dumps({**json.loads(event_line(event_type="adjustment", amount="-3")), "note": {"x": 1}})
    row = lines_frame([line]).transform(parse_events).first()
    assert row.reject_reason is None and row.amount == Decimal("-3")


def test_heartbeats_are_neither_events_nor_dead_letters(lines_frame):
    """A heartbeat is the JSON value true under "heartbeat" with a valid ingest_time; anything
    that looks like one but is not gets a dead-letter reason."""
    from shared.events import valid_events

    lines = [
        '{"heartbeat": true, "ingest_time": "2026-01-05T10:00:02Z"}',
        '{"heartbeat": true}',
        '{"heartbeat": true, "ingest_time": 5}',
        '{"heartbeat": "true", "ingest_time": "2026-01-05T10:00:02Z"}',
        '{"heartbeat": false, "ingest_time": "2026-01-05T10:00:02Z"}',
        event_line(),
    ]
    parsed = lines_frame(lines).transform(parse_events)
    rows = [
        (r.line_number, r.heartbeat, r.reject_reason, r.reject_detail) for r in parsed.orderBy("line_number").collect()
    ]
    assert rows == [
        (1, True, None, None),
        (2, False, "missing_field", "ingest_time"),
        (3, False, "invalid_ingest_time", "ingest_time"),
        (4, False, "missing_field", "event_id"),
        (5, False, "missing_field", "event_id"),
        (6, False, None, None),
    ]
    assert parsed.where("line_number = 1").first().ingest_time == datetime(2026, 1, 5, 10, 0, 2)
    assert [r.line_number for r in parsed.transform(valid_events).collect()] == [6]

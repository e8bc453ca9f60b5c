"""``parse_events`` gives the very rows the variant parser gave, on thousands of edge-case lines.

The clean path reads the writers' layout with string functions; the variant path reads any
JSON. Each line below is built to sit on an edge between them (a layout almost the writers',
a value almost valid, JSON that only a strict parser refuses), and every output column of every
line must equal the frozen reference (``tests/parse_reference.py``), with the two checks the
reference predates applied to its rows by a Python oracle: a repeated key (``duplicate_key``)
and an event time too far ahead of its ingest time (``event_time_in_future``). Lines in the
writers' layout and the same lines laid out otherwise must get the same verdicts on every
reason added since, the bytes-level ones included.
"""

from __future__ import annotations

import itertools
import json
from datetime import timedelta

from shared.config import LabConfig
from shared.durations import format_duration
from shared.events import EVENT_COLUMNS, parse_events
from tests import parse_reference
from tests.conftest import raw_frame, read_as_the_log_does

BASE = {
    "event_id": "e-1",
    "account_id": "acct-1",
    "event_type": "charge",
    "amount": "10.00",
    "currency": "USD",
    "event_time": "2026-01-05T10:00:00Z",
    "ingest_time": "2026-01-05T10:00:01Z",
}
VALUES = {
    "event_id": ["e-2", "", " ", "\t", "e\u00e9", "e\u2028", "e\\u0041", 'e"q', "e\x01", "e\r", "E-1"],
    "account_id": ["acct-2", "", "  ", "a\x1f", "a\u00ff", "a\\\\b"],
    "event_type": ["refund", "adjustment", "Charge", "charge ", "", "charge\r", "charge\x00"],
    "amount": [
        "0.000001",
        "-12.34",
        "12.3.4",
        "1e3",
        "1.1234567",
        "123456789012345",
        "12345678901234",
        "-0",
        "0",
        "0.0",
        "+1",
        " 1",
        "1 ",
        "1.",
        ".5",
        "12.34\r",
        "99999999999999.999999",
        "-99999999999999.999999",
        "\u0661",
        "1\x00",
        "12.34\r\r",
    ],
    "currency": ["JPY", "KWD", "usd", "XYZ", "US", "USD ", "USD\r", "EUR"],
    "event_time": [
        "2026-01-05T12:30:00.250+02:00",
        "2026-01-05T10:00:00",
        "2026-02-30T10:00:00Z",
        "2026-01-05",
        "2026-01-05T10:00:00.1234567Z",
        "2026-01-05T10:00:00Z\r",
        "2026-01-05T10:00:00Z\u2028",
        " 2026-01-05T10:00:00Z",
        "2026-01-05T10:00:00-00:30",
        "2026-01-05T24:00:00Z",
        "2026-13-05T10:00:00Z",
    ],
    "ingest_time": ["yesterday", "", "2026-01-05T10:00:01.5Z", "2026-01-05T10:00:01Z\r"],
}
NON_STRINGS = [None, 10.5, 42, True, False, {"x": 1}, ["a"], "null"]


def _writers_layout(record: dict) -> str:
    """What ``json.dumps`` writes, but with no escaping at all (raw control characters, quotes)."""
    return "{" + ", ".join(f'"{key}": "{value}"' for key, value in record.items()) + "}"


def edge_lines() -> list[str]:
    lines: list[str] = []
    for field, values in VALUES.items():
        for value in values:
            record = {**BASE, field: value}
            lines.append(json.dumps(record))
            lines.append(json.dumps(record, ensure_ascii=False))
            lines.append(_writers_layout(record))
            lines.append(json.dumps(record, separators=(",", ":")))
    for first, second in (
        ("event_type", "amount"),
        ("currency", "event_time"),
        ("event_id", "ingest_time"),
        ("account_id", "amount"),
    ):
        for one, two in itertools.product(VALUES[first], VALUES[second]):  # two fields off at once
            record = {**BASE, first: one, second: two}
            lines += [json.dumps(record), _writers_layout(record)]
    for field, values in VALUES.items():  # and without ingest_time, which is optional
        for value in values:
            record = {k: v for k, v in {**BASE, field: value}.items() if k != "ingest_time"}
            lines += [json.dumps(record), _writers_layout(record)]
    for field in BASE:
        without = {k: v for k, v in BASE.items() if k != field}
        lines += [json.dumps(without), _writers_layout(without)]
        for other in NON_STRINGS:
            lines.append(json.dumps({**BASE, field: other}))
    for first, second in itertools.permutations(list(BASE)[:4], 2):  # keys out of the writers' order
        record = dict(BASE)
        record[first], record[second] = record[second], record[first]
        reordered = {
            second: BASE[second],
            first: BASE[first],
            **{k: v for k, v in BASE.items() if k not in (first, second)},
        }
        lines += [json.dumps(record), json.dumps(reordered)]
    valid = json.dumps(BASE)
    lines += [
        "",
        " ",
        "\t",
        "\r",
        "{",
        "}",
        "{}",
        "[]",
        "[1, 2]",
        '"text"',
        "null",
        "true",
        "42",
        "\ufeff" + valid,
        valid + " ",
        " " + valid,
        valid + "\r",
        valid + ",",
        valid + "}",
        valid[:-1],
        valid + valid,
        valid + "\u2028",
        valid.replace('"e-1"', '"e-1", "event_id": "e-2"'),  # a repeated key
        valid.replace('"USD"', '"USD", "currency": "EUR"'),
        valid.replace("{", '{"note": "x", ', 1),
        valid.replace("}", ', "note": {"a": [1, 2]}}'),
        valid.replace("}", ', "heartbeat": false}'),
        valid.replace("}", ', "heartbeat": true}'),
        valid.replace('": "', '":"'),
        valid.replace(", ", ","),
        valid.replace(", ", " , "),
        valid.replace('"amount": "10.00"', '"amount" : "10.00"'),
        valid.replace('"', "'"),
        '{"heartbeat": true, "ingest_time": "2026-01-05T10:00:02Z"}',
        '{"heartbeat": true}',
        '{"heartbeat": true, "ingest_time": 5}',
        '{"heartbeat": "true", "ingest_time": "2026-01-05T10:00:02Z"}',
        '{"heartbeat": 1, "ingest_time": "2026-01-05T10:00:02Z"}',
        '{"heartbeat": true, "ingest_time": "2026-01-05T10:00:02Z", "event_id": 5}',
        '{"heartbeat": true, "heartbeat": true, "ingest_time": "2026-01-05T10:00:02Z"}',
        '{"ingest_time": "2026-01-05T10:00:02Z", "heartbeat": true}',
        '{"event_id": "a", ',
        '{"event_id": "a",}',
        '{"event_id": "a" "account_id": "b"}',
        '{"event_id": "a\x00"}',
        '{"event_id": "\\ud800"}',
    ]
    for cut in range(0, len(valid), 7):  # every prefix of a valid line
        lines.append(valid[:cut])
    return lines


# The reference stopped the whole query on these (a failed cast); now they are dead letters.
STOPPED_THE_REFERENCE = [
    (json.dumps({**BASE, "amount": "12.34\u2028"}), "invalid_amount"),
    (json.dumps({**BASE, "amount": "7\u0085"}), "invalid_amount"),
    (json.dumps({**BASE, "amount": "7\u2029", "event_type": "refund"}), "invalid_amount"),
]


def _rows(frame):
    return [tuple(row) for row in frame.orderBy("line_number").collect()]


SKEW = timedelta(microseconds=LabConfig.max_clock_skew)


def _with_later_checks(line: str, row: tuple) -> tuple:
    """The reference's row for ``line`` with the checks it predates, decided in Python: an
    object naming a key twice is ``duplicate_key`` (Spark's parser refused it: ``not_json``),
    and a valid event more than the skew ahead of its ingest time is ``event_time_in_future``."""
    *columns, reason, detail, heartbeat = row
    named = dict(zip(("segment", "line_number", *EVENT_COLUMNS[2:], "raw_line"), columns))
    if reason == "not_json":
        try:
            pairs = json.loads(line, object_pairs_hook=lambda pairs: pairs)
        except ValueError:
            pairs = None
        keys = [key for key, _ in pairs] if isinstance(pairs, list) else []
        repeated = [key for index, key in enumerate(keys) if key in keys[:index]]
        if repeated:
            return (*columns, "duplicate_key", repeated[0], heartbeat)
    if (
        reason is None
        and not heartbeat
        and named["ingest_time"] is not None
        and named["event_time"] - named["ingest_time"] > SKEW
    ):
        texts = json.loads(line)
        detail = (
            f"event_time {texts['event_time']} is more than {format_duration(LabConfig.max_clock_skew)} (max-clock-skew) "
            f"ahead of ingest_time {texts['ingest_time']}"
        )
        return (*columns, "event_time_in_future", detail, heartbeat)
    return row


def test_the_clean_path_and_the_variant_path_give_the_reference_rows(spark):
    lines = edge_lines()
    raw = raw_frame(spark, lines, segment=3)
    got, reference = _rows(raw.transform(parse_events)), _rows(raw.transform(parse_reference.parse_events))
    assert len(got) == len(lines) > 1000
    assert [list(frame.columns) for frame in (raw.transform(parse_events),)] == [
        raw.transform(parse_reference.parse_events).columns
    ]
    expected = [_with_later_checks(lines[row[1] - 1], row) for row in reference]
    differing = [(lines[g[1] - 1], g, e) for g, e in zip(got, expected) if g != e]
    assert differing == []
    # the edge cases do reach both paths and every verdict
    reasons = {row[-3] for row in got}
    assert None in reasons and {"not_json", "wrong_type", "invalid_amount", "amount_sign"} <= reasons
    assert {"duplicate_key", "event_time_in_future"} <= reasons


def _layouts(record: dict) -> list[bytes]:
    """The writers' layout (the clean path's) and three others (the variant path's)."""
    return [
        json.dumps(record).encode(),
        json.dumps(record, separators=(",", ":")).encode(),
        json.dumps(dict(reversed(list(record.items())))).encode(),
        b"  " + json.dumps(record).encode(),
    ]


def test_every_layout_of_a_line_gets_the_same_verdict_on_the_later_reasons(spark):
    records = [
        {**BASE, "event_time": "2099-01-01T00:00:00Z"},
        {**BASE, "event_time": "2026-01-05T10:05:01.000001Z"},
        {**BASE, "event_time": "2026-01-05T10:05:01Z"},  # exactly the skew ahead: valid
        {**BASE, "event_time": "2026-01-05T12:05:01.000001+02:00"},
        {**BASE, "event_id": "e-NOT-UTF8"},  # the marker becomes a byte that is not UTF-8
        {**BASE, "account_id": "a" * 300},  # cut by a reader at 256 bytes
        {**BASE, "event_type": "refund", "event_time": "2099-01-01T00:00:00Z"},  # amount_sign comes first
    ]
    groups = []
    for record in records:
        lines = _layouts(record)
        lines = [line.replace(b"NOT-UTF8", b"\xff") for line in lines]
        if len(record["account_id"]) > 256:
            lines = [read_as_the_log_does(line, 256)[0] for line in lines]
        groups.append(lines)
    rows = _rows(raw_frame(spark, [line for lines in groups for line in lines]).transform(parse_events))
    verdicts = [(row[-3], row[2:9], row[-2] if row[-3] == "event_time_in_future" else None) for row in rows]
    by_record = [verdicts[4 * index : 4 * index + 4] for index in range(len(records))]
    assert [group[0][0] for group in by_record] == [
        "event_time_in_future",
        "event_time_in_future",
        None,
        "event_time_in_future",
        "invalid_utf8",
        "line_too_long",
        "amount_sign",
    ]
    for group in by_record:
        assert group == [group[0]] * 4


def test_lines_that_stopped_the_reference_are_dead_letters(spark):
    lines = [line for line, _ in STOPPED_THE_REFERENCE]
    rows = raw_frame(spark, lines).transform(parse_events).orderBy("line_number").collect()
    assert [(r.reject_reason, r.reject_detail) for r in rows] == [
        (reason, "amount") for _, reason in STOPPED_THE_REFERENCE
    ]

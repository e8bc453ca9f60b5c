"""``unique_visitors`` through Spark, kept small: page-view validation with every dead-letter
reason (billing's checks of a line's bytes, JSON and clock included), and a generated log end to end (Spark parse, the stream step per segment in Arrow, the
batch truth through Spark, the oracle, reconciliation)."""

import base64
import json

import pyarrow as pa

from lklab.pipelines.unique_visitors.generator import PageViewParams, generate_page_views, load_page_views
from lklab.pipelines.unique_visitors.parse import (
    PARSED_SCHEMA,
    REJECT_REASONS,
    deduplicated_page_views,
    parse_page_views,
)
from lklab.pipelines.unique_visitors.reconcile_rule import reconcile_distinct
from lklab.pipelines.unique_visitors.rule import truth_counts, truth_members
from lklab.pipelines.unique_visitors.step import VisitorSettings
from lklab.pipelines.unique_visitors.truth import truth_counts as oracle_counts
from shared.eventlog import EventLog
from shared.events import RAW_LINE_SCHEMA
from shared.windows import TumblingWindows
from tests.conftest import raw_frame, read_as_the_log_does
from tests.visitor_lines import SECOND, concat, run, served_table

GOOD = {
    "event_id": "v-1",
    "user_id": "user-1",
    "url": "https://shop.example/cart",
    "event_time": "2026-01-05T10:00:00Z",
    "ingest_time": "2026-01-05T10:00:01Z",
}


# (line, reason, detail): the page-view checks, then billing's checks of a line's bytes, JSON and
# clock (``shared.line_checks``), the same reasons with the same details
CASES = [
    (json.dumps(GOOD), None, None),
    ("", "empty_line", None),
    ('{"event_id": ', "not_json", None),
    ("\ufeff" + json.dumps(GOOD), "not_json", None),  # a byte order mark inside a line is no whitespace
    (json.dumps(GOOD)[:-1] + ', "note": {"k": 1, "k": 2}}', "not_json", None),  # a key repeated in a nested object
    (json.dumps([GOOD]), "not_an_object", None),
    (
        json.dumps(GOOD).replace('"user_id": "user-1"', '"user_id": "user-1", "user_id": "user-2"'),
        "duplicate_key",
        "user_id",
    ),
    (json.dumps({k: v for k, v in GOOD.items() if k != "url"}), "missing_field", "url"),
    (json.dumps({**GOOD, "user_id": 7}), "wrong_type", "user_id"),
    (json.dumps({**GOOD, "user_id": "  "}), "missing_field", "user_id"),
    (json.dumps({**GOOD, "url": "/cart"}), "invalid_url", "url"),
    (json.dumps({**GOOD, "url": "https://shop.example/a b"}), "invalid_url", "url"),
    (json.dumps({**GOOD, "event_time": "2026-01-05T10:00:00"}), "invalid_event_time", "event_time"),
    (json.dumps({**GOOD, "ingest_time": "yesterday"}), "invalid_ingest_time", "ingest_time"),
    (
        json.dumps({**GOOD, "event_time": "2026-01-05T10:05:01Z"}),
        None,
        None,
    ),  # exactly 5m (max-clock-skew) after arrival
    (
        json.dumps({**GOOD, "event_time": "2026-01-05T10:05:01.000001Z"}),
        "event_time_in_future",
        "event_time 2026-01-05T10:05:01.000001Z is more than 5m (max-clock-skew) ahead of ingest_time 2026-01-05T10:00:01Z",
    ),
    (
        json.dumps({**GOOD, "event_time": "2099-01-01T00:00:00Z"}),
        "event_time_in_future",
        "event_time 2099-01-01T00:00:00Z is more than 5m (max-clock-skew) ahead of ingest_time 2026-01-05T10:00:01Z",
    ),
    (
        json.dumps({k: v for k, v in {**GOOD, "event_time": "2099-01-01T00:00:00Z"}.items() if k != "ingest_time"}),
        None,
        None,
    ),
    (json.dumps({"heartbeat": True, "ingest_time": "2026-01-05T10:00:02Z"}), None, None),
    (json.dumps({"heartbeat": True}), "missing_field", "ingest_time"),
]
# Lines only a reader can hand over: (the line as read, reason, detail, raw_line of the dead letter)
NOT_UTF8 = b'{"event_id": "v\xff", "user_id": "user-1"}'
LONG = b'{"event_id": "' + b"x" * 3000 + b'"}'
BYTE_CASES = [
    (NOT_UTF8, "invalid_utf8", "raw_line holds the line's 39 bytes in base64", base64.b64encode(NOT_UTF8).decode()),
    (read_as_the_log_does(LONG, 1024)[0], "line_too_long", "3016 bytes", LONG[:1024].decode()),
]


def test_every_reason_is_exercised():
    assert {reason for _, reason, _ in CASES} | {reason for _, reason, _, _ in BYTE_CASES} == set(REJECT_REASONS) | {
        None
    }


def test_page_views_parse_with_the_first_failing_reason(spark):
    rows = parse_page_views(raw_frame(spark, [line for line, _, _ in CASES])).toArrow()
    assert rows.schema.names == PARSED_SCHEMA.names
    got = list(zip(rows["reject_reason"].to_pylist(), rows["reject_detail"].to_pylist()))
    assert got == [(reason, detail) for _, reason, detail in CASES]
    assert rows["heartbeat"].to_pylist() == [line.startswith('{"heartbeat": true, "ingest') for line, _, _ in CASES]
    assert rows["raw_line"].to_pylist() == [line for line, _, _ in CASES]
    assert rows.slice(0, 1).select(["event_id", "user_id", "url"]).to_pylist() == [
        {"event_id": "v-1", "user_id": "user-1", "url": GOOD["url"]}
    ]


def test_lines_that_are_not_text_become_text_dead_letters(spark):
    rows = parse_page_views(raw_frame(spark, [line for line, _, _, _ in BYTE_CASES])).toArrow()
    assert list(
        zip(rows["reject_reason"].to_pylist(), rows["reject_detail"].to_pylist(), rows["raw_line"].to_pylist())
    ) == [case[1:] for case in BYTE_CASES]
    assert set(rows["event_id"].to_pylist()) == {None}


def test_a_generated_log_reconciles_exactly(spark, tmp_path):
    params = PageViewParams(scenario="billing", views=1500, span=1800 * SECOND, users=25, pages=30, malformed_rate=0.01)
    manifest = generate_page_views(params, tmp_path)
    log = EventLog(tmp_path)
    raw_rows = [
        (s.number, n, line, len(line.encode()), log.stamp(s.number))
        for s in log.segments()
        for n, line in enumerate(EventLog.read_lines(s.path), start=1)
    ]
    parsed = parse_page_views(spark.createDataFrame(raw_rows, RAW_LINE_SCHEMA))
    arrow = pa.Table.from_batches(parsed.toArrow().to_batches(), schema=None).cast(PARSED_SCHEMA)
    reasons = arrow.filter(pa.compute.is_valid(arrow["reject_reason"]))["reject_reason"].value_counts().to_pylist()
    assert {r["values"]: r["counts"] for r in reasons} == manifest["dead_letters"]

    settings = VisitorSettings(
        TumblingWindows(60 * SECOND), watermark_delay=10 * SECOND, allowed_lateness=0, dedup_horizon=3600 * SECOND
    )
    segments = [arrow.filter(pa.compute.equal(arrow["segment"], s.number)) for s in log.segments()]
    steps = run(settings, segments)
    assert concat(steps, "late").num_rows > 0  # the offline uploads arrive late

    views = deduplicated_page_views(parsed)
    truth = (
        truth_counts(settings.window)(views)
        .toArrow()
        .sort_by([("window_start", "ascending"), ("window_end", "ascending"), ("user_id", "ascending")])
    )
    assert truth.cast(oracle_counts(load_page_views(tmp_path), settings.window).schema).equals(
        oracle_counts(load_page_views(tmp_path), settings.window)
    )
    members = truth_members(settings.window)(views).toArrow()
    result = reconcile_distinct(
        served_table(steps), concat(steps, "members"), concat(steps, "late"), members, read_through=len(segments)
    )
    assert result.proven, result.differences[:5]
    assert result.verdicts()["late"] > 0 and result.verdicts()["differs"] == 0

    unread = reconcile_distinct(
        served_table(steps[:-3]),
        concat(steps[:-3], "members"),
        concat(steps[:-3], "late"),
        members,
        read_through=len(segments) - 3,
    )
    assert unread.differences and set(unread.reasons()) == {"unread"}

"""``unique_visitors`` through Spark, kept small: page-view validation with its dead-letter
reasons, and a generated log end to end (Spark parse, the stream step per segment in Arrow, the
batch truth through Spark, the oracle, reconciliation)."""

import json

import pyarrow as pa

from lklab.page_view_generator import PageViewParams, generate_page_views, load_page_views
from lklab.page_view_truth import truth_counts as oracle_counts
from reconciliation.distinct_reconcile import reconcile_distinct
from shared.distinct_urls import truth_counts, truth_members
from shared.eventlog import EventLog
from shared.events import RAW_LINE_SCHEMA
from shared.page_views import PARSED_SCHEMA, deduplicated_page_views, parse_page_views
from shared.visitors_stream import VisitorSettings
from shared.windows import TumblingWindows
from tests.visitor_lines import SECOND, concat, run, served_table

GOOD = {"event_id": "v-1", "user_id": "user-1", "url": "https://shop.example/cart", "event_time": "2026-01-05T10:00:00Z",
        "ingest_time": "2026-01-05T10:00:01Z"}


def test_page_views_parse_with_the_first_failing_reason(spark):
    lines = [
        json.dumps(GOOD),
        "",
        '{"event_id": ',
        json.dumps([GOOD]),
        json.dumps({k: v for k, v in GOOD.items() if k != "url"}),
        json.dumps({**GOOD, "user_id": 7}),
        json.dumps({**GOOD, "user_id": "  "}),
        json.dumps({**GOOD, "url": "/cart"}),
        json.dumps({**GOOD, "url": "https://shop.example/a b"}),
        json.dumps({**GOOD, "event_time": "2026-01-05T10:00:00"}),
        json.dumps({**GOOD, "ingest_time": "yesterday"}),
        json.dumps({"heartbeat": True, "ingest_time": "2026-01-05T10:00:02Z"}),
        json.dumps({"heartbeat": True}),
    ]
    raw = spark.createDataFrame([(1, n, line, len(line.encode())) for n, line in enumerate(lines, start=1)], RAW_LINE_SCHEMA)
    rows = parse_page_views(raw).toArrow()
    assert rows.schema.names == PARSED_SCHEMA.names
    got = list(zip(rows["reject_reason"].to_pylist(), rows["reject_detail"].to_pylist(), rows["heartbeat"].to_pylist()))
    assert got == [
        (None, None, False),
        ("empty_line", None, False),
        ("not_json", None, False),
        ("not_an_object", None, False),
        ("missing_field", "url", False),
        ("wrong_type", "user_id", False),
        ("missing_field", "user_id", False),
        ("invalid_url", "url", False),
        ("invalid_url", "url", False),
        ("invalid_event_time", "event_time", False),
        ("invalid_ingest_time", "ingest_time", False),
        (None, None, True),
        ("missing_field", "ingest_time", False),
    ]
    assert rows.slice(0, 1).select(["event_id", "user_id", "url"]).to_pylist() == [{"event_id": "v-1", "user_id": "user-1", "url": GOOD["url"]}]


def test_a_generated_log_reconciles_exactly(spark, tmp_path):
    params = PageViewParams(scenario="billing", views=1500, span=1800 * SECOND, users=25, pages=30, malformed_rate=0.01)
    manifest = generate_page_views(params, tmp_path)
    log = EventLog(tmp_path)
    raw_rows = [(s.number, n, line, len(line.encode())) for s in log.segments() for n, line in enumerate(EventLog.read_lines(s.path), start=1)]
    parsed = parse_page_views(spark.createDataFrame(raw_rows, RAW_LINE_SCHEMA))
    arrow = pa.Table.from_batches(parsed.toArrow().to_batches(), schema=None).cast(PARSED_SCHEMA)
    reasons = arrow.filter(pa.compute.is_valid(arrow["reject_reason"]))["reject_reason"].value_counts().to_pylist()
    assert {r["values"]: r["counts"] for r in reasons} == manifest["dead_letters"]

    settings = VisitorSettings(TumblingWindows(60 * SECOND), watermark_delay=10 * SECOND, allowed_lateness=0, dedup_horizon=3600 * SECOND)
    segments = [arrow.filter(pa.compute.equal(arrow["segment"], s.number)) for s in log.segments()]
    steps = run(settings, segments)
    assert concat(steps, "late").num_rows > 0  # the offline uploads arrive late

    views = deduplicated_page_views(parsed)
    truth = truth_counts(settings.window)(views).toArrow().sort_by([("window_start", "ascending"), ("window_end", "ascending"), ("user_id", "ascending")])
    assert truth.cast(oracle_counts(load_page_views(tmp_path), settings.window).schema).equals(oracle_counts(load_page_views(tmp_path), settings.window))
    members = truth_members(settings.window)(views).toArrow()
    result = reconcile_distinct(served_table(steps), concat(steps, "members"), concat(steps, "late"), members, read_through=len(segments))
    assert result.proven, result.differences[:5]
    assert result.verdicts()["late"] > 0 and result.verdicts()["differs"] == 0

    unread = reconcile_distinct(served_table(steps[:-3]), concat(steps[:-3], "members"), concat(steps[:-3], "late"), members,
                                read_through=len(segments) - 3)
    assert unread.differences and set(unread.reasons()) == {"unread"}

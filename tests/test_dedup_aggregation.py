"""Dedup by event_id in log order, exact decimal sums, and the classify chain's conservation."""

from datetime import datetime
from decimal import Decimal

from pyspark.sql.pandas.types import to_arrow_schema

from shared.aggregation import AGGREGATE_ARROW_SCHEMA, AGGREGATE_SCHEMA
from shared.dedup import first_copies, later_copies, mark_duplicates
from shared.events import EVENT_SCHEMA, parse_events, valid_events
from shared.pipeline import classify_lines, window_totals
from shared.windows import TumblingWindows
from tests.conftest import event_line, raw_frame


def test_first_copy_in_log_order_wins(spark):
    early = raw_frame(spark, [event_line(event_id="x", amount="1.00"), event_line(event_id="y")], segment=1)
    late = raw_frame(spark, [event_line(event_id="x", amount="1.00", ingest_time="2026-01-05T11:00:00Z"),
                             event_line(event_id="x", amount="2.00")], segment=2)
    marked = early.union(late).transform(parse_events).transform(valid_events).transform(mark_duplicates)
    kept = sorted((r.event_id, r.segment, r.line_number) for r in marked.transform(first_copies).collect())
    assert kept == [("x", 1, 1), ("y", 1, 2)]
    dupes = sorted(
        (r.segment, r.line_number, r.first_segment, r.first_line_number, r.payload_conflict)
        for r in marked.transform(later_copies).collect()
    )
    # the retry differs only in ingest_time: a harmless duplicate; the other copy changed the amount.
    assert dupes == [(2, 1, 1, 1, False), (2, 2, 1, 1, True)]


def test_rejected_line_does_not_shadow_a_later_valid_copy(spark):
    lines = [event_line(event_id="x", currency="usd"), event_line(event_id="x")]
    result = classify_lines(raw_frame(spark, lines).transform(parse_events))
    assert [(r.line_number, r.reject_reason) for r in result.dead_letters.collect()] == [(1, "invalid_currency")]
    assert [r.line_number for r in result.events.collect()] == [2]
    assert result.duplicates.count() == 0


def test_decimal_sums_are_exact(spark):
    amounts = ["0.1", "0.2", "0.000001", "99999999999999.999999", "-0.3"]
    lines = [event_line(event_id=f"e{i}", amount=a, event_type="adjustment") for i, a in enumerate(amounts)]
    parsed = raw_frame(spark, lines).transform(parse_events)
    totals = classify_lines(parsed).events.transform(window_totals(TumblingWindows(3_600_000_000))).collect()
    assert len(totals) == 1
    row = totals[0]
    assert row.event_count == 5
    assert row.amount_total == Decimal("100000000000000.000000")
    assert (row.window_start, row.window_end) == (datetime(2026, 1, 5, 10), datetime(2026, 1, 5, 11))


def test_currencies_and_accounts_are_never_added_together(spark):
    lines = [
        event_line(event_id="1", amount="5.00", currency="USD"),
        event_line(event_id="2", amount="7.00", currency="EUR"),
        event_line(event_id="3", amount="1.50", currency="USD", account_id="acct-2"),
        event_line(event_id="4", amount="2.25", currency="USD"),
    ]
    events = classify_lines(raw_frame(spark, lines).transform(parse_events)).events
    got = sorted((r.account_id, r.currency, r.event_count, r.amount_total) for r in events.transform(window_totals(TumblingWindows(60_000_000))).collect())
    assert got == [
        ("acct-1", "EUR", 1, Decimal("7.000000")),
        ("acct-1", "USD", 2, Decimal("7.250000")),
        ("acct-2", "USD", 1, Decimal("1.500000")),
    ]


def test_arrow_schemas_have_the_types_spark_gives_the_same_columns(spark):
    """The speed step (Arrow) and the batch path (Spark) describe the same rows: same names, same types."""

    def types(schema):
        return [(field.name, field.type) for field in schema]

    parsed = raw_frame(spark, [event_line()]).transform(parse_events).transform(valid_events)
    assert types(to_arrow_schema(parsed.schema, timezone="UTC")) == types(EVENT_SCHEMA)
    assert types(to_arrow_schema(AGGREGATE_SCHEMA, timezone="UTC")) == types(AGGREGATE_ARROW_SCHEMA)

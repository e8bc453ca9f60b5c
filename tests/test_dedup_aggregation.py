"""Dedup by event_id in log order, exact decimal sums, and the classify chain's conservation."""

from datetime import datetime
from decimal import Decimal

from pyspark.sql.pandas.types import to_arrow_schema

from shared.aggregation import AGGREGATE_ARROW_SCHEMA, AGGREGATE_SCHEMA
from shared.batch_chain import classify_lines, window_totals
from shared.dedup import first_copies, later_copies, mark_duplicates
from shared.events import EVENT_SCHEMA, parse_events, valid_events
from shared.windows import TumblingWindows
from tests.conftest import event_line, raw_frame


def test_first_copy_in_log_order_wins(spark):
    early = raw_frame(spark, [event_line(event_id="x", amount="1.00"), event_line(event_id="y")], segment=1)
    late = raw_frame(
        spark,
        [
            event_line(event_id="x", amount="1.00", ingest_time="2026-01-05T11:00:00Z"),
            event_line(event_id="x", amount="2.00"),
        ],
        segment=2,
    )
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
    got = sorted(
        (r.account_id, r.currency, r.event_count, r.amount_total)
        for r in events.transform(window_totals(TumblingWindows(60_000_000))).collect()
    )
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


def test_spark_marks_and_totals_are_the_arrow_rules(spark):
    """Ids seen once are marked by Spark and fixed windows summed by it; the marks and totals are
    the Arrow rules' over the same events (copies in several segments, conflicting payloads)."""
    import random

    import pyarrow as pa
    import pyarrow.compute  # noqa: F401  (pa.compute)

    from shared.batch_chain import window_totals_table
    from shared.dedup import mark_duplicates_table
    from shared.windows import SlidingWindows

    rng = random.Random(18)
    segments = {1: [], 2: [], 3: []}
    for number in range(200):
        copies = rng.choice([1, 1, 1, 2, 3])
        for copy in range(copies):
            amount = (
                f"{rng.randrange(1, 10**6)}.{rng.randrange(0, 10**6):06d}" if copy == 0 or rng.random() < 0.3 else "1.5"
            )
            time = f"2026-01-05T10:{rng.randrange(60):02d}:00Z"
            line = event_line(
                event_id=f"e{number}",
                amount=amount,
                account_id=f"a{number % 3}",
                event_time=time,
                ingest_time="2026-01-05T12:00:00Z",
            )
            segments[rng.choice([1, 2, 3])].append(line)
    frames = [raw_frame(spark, lines, segment=segment) for segment, lines in segments.items()]
    events = frames[0].union(frames[1]).union(frames[2]).transform(parse_events).transform(valid_events)
    arrow_events = events.toArrow().cast(EVENT_SCHEMA)

    def rows(table, columns):
        return sorted(tuple(row[c] for c in columns) for row in table.to_pylist())

    marks = ["segment", "line_number", "is_duplicate", "first_segment", "first_line_number", "payload_conflict"]
    marked = events.transform(mark_duplicates).toArrow()
    assert rows(marked, marks) == rows(mark_duplicates_table(arrow_events), marks)
    assert pa.compute.sum(marked["is_duplicate"]).as_py() > 0 and pa.compute.sum(marked["payload_conflict"]).as_py() > 0

    firsts = marked.filter(pa.compute.invert(marked["is_duplicate"])).select(EVENT_SCHEMA.names).cast(EVENT_SCHEMA)
    for spec in (TumblingWindows(60_000_000), SlidingWindows(size=300_000_000, slide=60_000_000)):
        totals = spark.createDataFrame(firsts).transform(window_totals(spec)).toArrow()
        assert rows(totals, AGGREGATE_SCHEMA.fieldNames()) == rows(
            window_totals_table(spec, firsts), AGGREGATE_SCHEMA.fieldNames()
        )

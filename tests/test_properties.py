"""Property checks: every line lands exactly once, money is conserved, Spark agrees with NumPy."""

import functools
import tempfile
from decimal import Decimal

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import functions as F

from lklab.pipelines.billing_windows.generator import GeneratedEvents
from lklab.pipelines.billing_windows.summary import same_rows
from lklab.pipelines.billing_windows.truth import truth_windows
from shared.batch_chain import classify_lines, window_totals
from shared.eventlog import EventLog
from shared.events import parse_events
from shared.log_source import parsed_log
from shared.windows import SessionWindows, SlidingWindows, TumblingWindows
from tests.conftest import event_line, raw_frame

SPARK_SETTINGS = settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

good_line = st.builds(
    lambda i, cents, minute: (
        event_line(
            event_id=f"e{i}",
            amount=f"{cents // 100}.{cents % 100:02d}",
            event_time=f"2026-01-05T10:{minute:02d}:00Z",
            ingest_time="2026-01-05T11:00:00Z",
        ),
        Decimal(cents).scaleb(-2),
    ),
    st.integers(0, 8),
    st.integers(1, 10_000),
    st.integers(0, 59),
)
bad_line = st.sampled_from(["", "{", "[1]", event_line(currency="usd"), event_line(amount="x")]).map(
    lambda line: (line, None)
)


def landed(result) -> tuple[list, list, list]:
    """``(events, duplicates, dead letters)`` of ``classify_lines``, read in one Spark query (a
    union: the parse and the broadcast of repeated ids run once, not once per frame); a dead
    letter's ``text`` says whether its ``raw_line`` is valid UTF-8."""
    amount = result.events.schema["amount"].dataType
    frames = {
        "event": result.events.select("line_number", "event_id", "amount", F.lit(True).alias("text")),
        "duplicate": result.duplicates.select("line_number", "event_id", "amount", F.lit(True).alias("text")),
        "dead": result.dead_letters.select(
            "line_number",
            F.lit(None).cast("string").alias("event_id"),
            F.lit(None).cast(amount).alias("amount"),
            F.is_valid_utf8("raw_line").alias("text"),
        ),
    }
    union = functools.reduce(
        lambda a, b: a.unionByName(b), (frame.withColumn("kind", F.lit(kind)) for kind, frame in frames.items())
    )
    rows = union.collect()
    return tuple([r for r in rows if r.kind == kind] for kind in frames)


@SPARK_SETTINGS
@given(st.lists(st.one_of(good_line, bad_line), min_size=1, max_size=25))
def test_every_line_lands_exactly_once_and_money_is_conserved(spark, tagged):
    lines = [line for line, _ in tagged]
    events, duplicates, dead = landed(classify_lines(raw_frame(spark, lines).transform(parse_events)))
    positions = sorted(r.line_number for r in events + duplicates + dead)
    assert positions == list(range(1, len(lines) + 1))
    valid_money = sum((amount for _, amount in tagged if amount is not None), Decimal(0))
    assert sum((r.amount for r in events + duplicates), Decimal(0)) == valid_money
    assert len({r.event_id for r in events}) == len(events)


# What the log's readers meet: a line dated 2099, a repeated key, bytes that are not UTF-8, a
# line over max-line-bytes (256 here), and a byte order mark opening the segment.
hostile_line = st.sampled_from(
    [
        event_line(event_id="from-2099", event_time="2099-01-01T00:00:00Z").encode(),
        b'{"event_id": "a", "event_id": "b"}',
        b'{"event_id": "\xff\xfe"}',
        b'{"event_id": "' + b"x" * 400 + b'"}',
        b" " * 300,
    ]
).map(lambda line: (line, None))


@SPARK_SETTINGS
@given(st.lists(st.one_of(good_line, bad_line, hostile_line), min_size=1, max_size=25), st.booleans())
def test_every_line_of_a_real_segment_lands_exactly_once_whatever_its_bytes(spark, tagged, byte_order_mark):
    lines = [line if isinstance(line, bytes) else line.encode() for line, _ in tagged]
    with tempfile.TemporaryDirectory() as lake:
        EventLog(lake).append([b"\xef\xbb\xbf" + lines[0], *lines[1:]] if byte_order_mark else lines, stamp=False)
        events, duplicates, dead = landed(classify_lines(parsed_log(spark, lake, 1, max_line_bytes=256)))
    not_text = sum(1 for r in dead if r.text is False)  # as where(~is_valid_utf8) counts: null is not false
    assert sorted(r.line_number for r in events + duplicates + dead) == list(range(1, len(lines) + 1))
    valid_money = sum((amount for _, amount in tagged if amount is not None), Decimal(0))
    assert sum((r.amount for r in events + duplicates), Decimal(0)) == valid_money
    assert not_text == 0  # every dead letter's raw_line is text, whatever the line held


times = st.lists(st.integers(-3_600, 3_600), min_size=1, max_size=30)
specs = st.sampled_from(
    [
        TumblingWindows(60_000_000),
        SlidingWindows(120_000_000, 30_000_000),
        SlidingWindows(50_000_000, 20_000_000),
        SessionWindows(90_000_000),
    ]
)


@SPARK_SETTINGS
@given(times, st.lists(st.integers(-5_000, 5_000), min_size=30, max_size=30), specs)
def test_spark_windows_equal_the_independent_numpy_truth(spark, seconds, cents, spec):
    n = len(seconds)
    start = 1_767_607_200_000_000
    generated = GeneratedEvents(
        event_ids=np.array([f"e{i:03d}" for i in range(n)]),
        accounts=np.array([f"acct-{i % 3}" for i in range(n)]),
        currencies=np.array(["USD"] * n),
        event_types=np.array(["adjustment"] * n),
        amount_minor=np.array(cents[:n], dtype=np.int64),
        event_times=start + np.array(seconds, dtype=np.int64) * 1_000_000,
        ingest_times=start + np.array(seconds, dtype=np.int64) * 1_000_000,
    )
    rows = [
        (e, a, "USD", Decimal(int(m)).scaleb(-2), int(t))
        for e, a, m, t in zip(generated.event_ids, generated.accounts, generated.amount_minor, generated.event_times)
    ]
    df = spark.createDataFrame(
        rows, "event_id string, account_id string, currency string, amount decimal(20,6), t long"
    )
    df = df.selectExpr("*", "timestamp_micros(t) as event_time").drop("t")
    assert same_rows(df.transform(window_totals(spec)).toArrow(), truth_windows(generated, spec))

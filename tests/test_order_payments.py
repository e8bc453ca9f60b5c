"""The order_payments pipeline's core: validation, the interval join (batch rule and stream step),
its transcripts through both paths, random micro-batch cuts, conservation, and reconciliation.

Transcripts (``tests/transcripts/order_payments/*.yaml``, read as ``tests/order_payment_transcripts``
says) run here through the stream step in Arrow, one segment per micro-batch;
``tests/test_transcripts_spark.py`` runs them through the Spark jobs.
"""

from __future__ import annotations

import base64
import json
from datetime import timedelta
from decimal import Decimal

import pyarrow as pa
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lklab.pipelines.order_payments.parse import ORDER_EVENT_SCHEMA, REJECT_REASONS, parse_order_line, parse_order_lines
from lklab.pipelines.order_payments.reconcile_rule import JoinSide, reconcile_join
from lklab.pipelines.order_payments.rule import JoinSettings, join_events, join_log, join_step
from lklab.pipelines.order_payments.state import JoinState, join_state_from_table, join_state_table
from tests.order_payment_transcripts import (
    BASE,
    MINUTE,
    TRANSCRIPTS,
    check_reconciliation,
    check_stream,
    check_truth,
    event,
    heartbeat,
    join_settings_of,
    raw,
    segment_lines,
)


def run_stream(batches: list[pa.Table], join_settings: JoinSettings, state: JoinState | None = None):
    state = state or JoinState.empty()
    steps = []
    for batch_id, parsed in enumerate(batches):
        step = join_step(parsed, state, join_settings, batch_id)
        steps.append(step)
        state = step.state
    return steps, state


def concat(steps, name: str) -> pa.Table:
    return pa.concat_tables([getattr(step, name) for step in steps])


# ----------------------------------------------------------------------------- validation


FUTURE_DETAIL = "event_time {} is more than 5m (max-clock-skew) ahead of ingest_time 2026-01-05T20:00:00.000000Z"
ORDER_CASES = [
    ("   ", "empty_line", None),
    ('{"event_id": "o1"', "not_json", None),
    ('{"amount": NaN}', "not_json", None),
    ("\ufeff" + event("o1", "order", "A", 0, 0), "not_json", None),  # a byte order mark inside a line is no whitespace
    (
        event("o1", "order", "A", 0, 0)[:-1] + ', "note": {"k": 1, "k": 2}}',
        "not_json",
        None,
    ),  # a key repeated in a nested object
    ("[1, 2]", "not_an_object", None),
    (
        event("o1", "order", "A", 0, 0).replace('"kind": "order"', '"kind": "order", "kind": "payment"'),
        "duplicate_key",
        "kind",
    ),
    ('{"heartbeat": true, "heartbeat": true, "ingest_time": "2026-01-05T10:00:02Z"}', "duplicate_key", "heartbeat"),
    ('{"heartbeat": true}', "missing_field", "ingest_time"),
    ('{"heartbeat": true, "ingest_time": "yesterday"}', "invalid_ingest_time", "ingest_time"),
    (
        json.dumps({"event_id": "o1", "kind": "order", "order_id": "A", "amount": "1", "currency": "EUR"}),
        "missing_field",
        "event_time",
    ),
    (
        json.dumps(
            {"event_id": "o1", "kind": "order", "order_id": 7, "amount": "1", "currency": "EUR", "event_time": "x"}
        ),
        "wrong_type",
        "order_id",
    ),
    (event("o1", "order", " ", 0, 0), "missing_field", "order_id"),
    (event("o1", "refund", "A", 0, 0), "invalid_kind", "kind"),
    (event("o1", "order", "A", 0, 0, amount="1.2.3"), "invalid_amount", "amount"),
    (event("o1", "order", "A", 0, 0, amount="1.1234567"), "amount_out_of_range", "amount"),
    (event("o1", "payment", "A", 0, 0, amount="0.00"), "amount_sign", "amount"),
    (event("o1", "payment", "A", 0, 0, amount="-5"), "amount_sign", "amount"),
    (event("o1", "order", "A", 0, 0, currency="eur"), "invalid_currency", "currency"),
    (event("o1", "order", "A", 0, 0).replace("10:00:00.000000Z", "10:00:00"), "invalid_event_time", "event_time"),
    (
        event("o1", "order", "A", 0, 0).replace("2026-01-05T10:00:00", "2026-02-30T10:00:00"),
        "invalid_event_time",
        "event_time",
    ),
    (
        event("o1", "order", "A", 0, 0).replace("20:00:00.000000Z", "20:00:00+25:00"),
        "invalid_ingest_time",
        "ingest_time",
    ),
    # the ingest time is 10 h after the event time: 10 h 5 min is the latest accepted
    (event("o1", "order", "A", 605, 0), None, None),
    (
        event("o1", "order", "A", 605, 0).replace("20:05:00.000000Z", "20:05:00.000001Z"),
        "event_time_in_future",
        FUTURE_DETAIL.format("2026-01-05T20:05:00.000001Z"),
    ),
    (
        event("o1", "order", "A", 0, 0).replace("2026-01-05T10:00:00.000000Z", "2099-01-01T00:00:00Z"),
        "event_time_in_future",
        FUTURE_DETAIL.format("2099-01-01T00:00:00Z"),
    ),
    (
        json.dumps(
            {k: v for k, v in json.loads(event("o1", "order", "A", 0, 0)).items() if k != "ingest_time"}
        ).replace("2026-01-05T10:00:00.000000Z", "2099-01-01T00:00:00Z"),
        None,
        None,
    ),  # no ingest time: nothing to compare with
]
# Lines only a reader can hand over: (the line as read, its length, reason, detail, raw_line of the dead letter)
NOT_UTF8 = b'{"event_id": "o\xff", "kind": "order"}'
LONG = b'{"event_id": "' + b"x" * 3000 + b'"}'
ORDER_BYTE_CASES = [
    (
        NOT_UTF8,
        len(NOT_UTF8),
        "invalid_utf8",
        "raw_line holds the line's 35 bytes in base64",
        base64.b64encode(NOT_UTF8).decode(),
    ),
    (LONG[:1024], len(LONG), "line_too_long", "3016 bytes", LONG[:1024].decode()),
]


def test_every_order_reason_is_exercised():
    assert {case[1] for case in ORDER_CASES} | {case[2] for case in ORDER_BYTE_CASES} == set(REJECT_REASONS) | {None}


@pytest.mark.parametrize("line, reason, detail", ORDER_CASES)
def test_each_bad_line_gets_the_first_failing_reason(line, reason, detail):
    parsed = parse_order_line(line)
    assert (parsed["reject_reason"], parsed["reject_detail"]) == (reason, detail)


def test_lines_that_are_not_text_become_text_dead_letters():
    """The bytes as the log's readers hand them over: a Spark string that is not UTF-8 (an Arrow
    string column holds it unchecked) and a line cut at max-line-bytes, with its length."""
    lines = pa.array([line for line, *_ in ORDER_BYTE_CASES], pa.binary()).view(pa.string())
    raw_lines = pa.table(
        {
            "segment": [1, 1],
            "line_number": [1, 2],
            "raw_line": lines,
            "line_bytes": [case[1] for case in ORDER_BYTE_CASES],
        }
    )
    parsed = parse_order_lines(raw_lines)
    assert list(
        zip(parsed["reject_reason"].to_pylist(), parsed["reject_detail"].to_pylist(), parsed["raw_line"].to_pylist())
    ) == [case[2:] for case in ORDER_BYTE_CASES]
    assert base64.b64decode(parsed["raw_line"][0].as_py()) == NOT_UTF8


def test_a_valid_line_keeps_exact_money_and_utc_microseconds():
    table = parse_order_lines(
        raw(
            1,
            [
                event("p1", "payment", "A", 0, 0, amount="12.345678").replace('Z", "ingest', '+02:00", "ingest'),
                heartbeat(1),
            ],
        )
    )
    row, beat = table.to_pylist()
    assert row["amount"] == Decimal("12.345678") and row["reject_reason"] is None and not row["heartbeat"]
    assert row["event_time"] == BASE - timedelta(hours=2)
    assert beat["heartbeat"] and beat["reject_reason"] is None and beat["event_id"] is None


# ----------------------------------------------------------------------------- the rule


def events_table(rows: list[tuple]) -> pa.Table:
    """``(event_id, kind, order_id, minutes)`` as first copies, one line each, in the order given."""
    return parse_order_lines(raw(1, [event(i, k, o, t, n) for n, (i, k, o, t) in enumerate(rows)])).select(
        ORDER_EVENT_SCHEMA.names
    )


def test_both_ends_of_the_interval_match_and_the_join_is_many_to_many():
    result = join_events(
        events_table(
            [
                ("o1", "order", "A", 0),
                ("p0", "payment", "A", 0),
                ("p15", "payment", "A", 15),
                ("p16", "payment", "A", 16),
                ("p-1", "payment", "B", 9),
                ("o2", "order", "B", 10),
                ("o3", "order", "B", 5),
                ("o4", "order", "C", 0),
            ]
        ),
        15 * MINUTE,
    )
    pairs = sorted(zip(result.matched["order_event_id"].to_pylist(), result.matched["payment_event_id"].to_pylist()))
    assert pairs == [("o1", "p0"), ("o1", "p15"), ("o3", "p-1")]  # p-1 is before o2, inside o3's interval
    assert result.unpaid["event_id"].to_pylist() == ["o2", "o4"]
    assert result.orphans["event_id"].to_pylist() == ["p16"]


def test_a_zero_bound_matches_only_the_same_instant():
    result = join_events(
        events_table([("o1", "order", "A", 3), ("p1", "payment", "A", 3), ("p2", "payment", "A", 4)]), 0
    )
    assert result.matched["payment_event_id"].to_pylist() == ["p1"] and result.orphans["event_id"].to_pylist() == ["p2"]


def test_settings_reject_negative_durations_naming_the_setting():
    with pytest.raises(ValueError, match="bound must not be negative"):
        JoinSettings(bound=-1)
    with pytest.raises(ValueError, match="allowed-lateness must not be negative"):
        JoinSettings(allowed_lateness=-1)


# ----------------------------------------------------------------------------- transcripts


def transcript_batches(segments: list) -> list[pa.Table]:
    return [parse_order_lines(raw(number, lines)) for number, lines in enumerate(segment_lines(segments), start=1)]


def stream_side(steps, state: JoinState, last_segment: int) -> JoinSide:
    return JoinSide(
        last_segment,
        concat(steps, "matched"),
        concat(steps, "unpaid"),
        concat(steps, "orphans"),
        concat(steps, "duplicates"),
        concat(steps, "dead_letters"),
        concat(steps, "late"),
        pa.concat_tables([state.orders, state.payments]),
    )


def truth_side(batches: list[pa.Table], bound: int) -> JoinSide:
    truth = join_log(pa.concat_tables(batches), bound)
    return JoinSide(
        len(batches),
        truth.result.matched,
        truth.result.unpaid,
        truth.result.orphans,
        truth.duplicates,
        truth.dead_letters,
    )


@pytest.fixture(params=TRANSCRIPTS, ids=[p.stem for p in TRANSCRIPTS])
def transcript(request):
    return yaml.safe_load(request.param.read_text())


def test_transcript_through_the_stream_step_and_the_batch_rule(transcript):
    join_settings = join_settings_of(transcript["settings"])
    batches = transcript_batches(transcript["segments"])
    steps, state = run_stream(batches, join_settings)
    expect = transcript["expect"]
    check_stream(
        expect,
        matched=concat(steps, "matched"),
        unpaid=concat(steps, "unpaid"),
        orphans=concat(steps, "orphans"),
        late=concat(steps, "late"),
        duplicates=concat(steps, "duplicates"),
        dead_letters=concat(steps, "dead_letters"),
        held=state.orders["event_id"].to_pylist() + state.payments["event_id"].to_pylist(),
    )
    truth = join_log(pa.concat_tables(batches), join_settings.bound).result
    check_truth(expect, matched=truth.matched, unpaid=truth.unpaid, orphans=truth.orphans)
    ids = {(r["segment"], r["line_number"]): r["event_id"] for b in batches for r in b.to_pylist()}
    check_reconciliation(
        expect, reconcile_join(truth_side(batches, join_settings.bound), stream_side(steps, state, len(batches))), ids
    )


# ----------------------------------------------------------------------------- random logs


@st.composite
def random_logs(draw):
    """Segments of order/payment lines (a few order ids, times within an hour), retries of earlier
    lines (some with another payload), bad lines and heartbeats, ingested one second apart per
    segment (or several segments in one second)."""
    count = draw(st.integers(1, 40))
    lines, segments, sent = [], [], []
    second = 0
    for n in range(count):
        choice = draw(st.integers(0, 9))
        if choice == 0 and sent:
            earlier = draw(st.sampled_from(sent))
            if draw(st.booleans()):
                copy = earlier
            else:  # a conflicting copy: same event_id, another time
                copy = event(json.loads(earlier)["event_id"], "payment", "A", draw(st.integers(0, 60)), second)
            lines.append(copy)
        elif choice == 1:
            lines.append(
                draw(st.sampled_from(["", "{", heartbeat(second), event(f"b{n}", "order", "A", 0, second, amount="0")]))
            )
        else:
            kind = draw(st.sampled_from(["order", "payment"]))
            sent.append(event(f"{kind[0]}{n}", kind, draw(st.sampled_from("ABCD")), draw(st.integers(0, 60)), second))
            lines.append(sent[-1])
        if draw(st.integers(0, 2)) == 0:
            segments.append(lines)
            lines = []
            second += draw(st.sampled_from([0, 1, 1, 30]))
    segments.append(lines + [heartbeat(second + 1)])
    return [parse_order_lines(raw(k + 1, segment)) for k, segment in enumerate(segments) if segment]


join_settings_strategy = st.builds(
    JoinSettings,
    bound=st.sampled_from([0, 5 * MINUTE, 15 * MINUTE]),
    watermark_delay=st.sampled_from([0, 2 * MINUTE, 10 * MINUTE]),
    watermark_interval=st.sampled_from([0, 1_000_000, 60_000_000]),
    dedup_horizon=st.sampled_from([MINUTE, 60 * MINUTE]),
    allowed_lateness=st.sampled_from([0, 0, 5 * MINUTE, 30 * MINUTE]),
)

STREAM_OUTPUTS = ("matched", "unpaid", "orphans", "late", "duplicates", "dead_letters")


def outputs(steps, state: JoinState) -> dict:
    found = {
        name: sorted(
            tuple(sorted(r.items(), key=str)) for r in concat(steps, name).drop_columns(["batch_id"]).to_pylist()
        )
        for name in STREAM_OUTPUTS
    }
    found["state"] = sorted(map(str, join_state_table(state).to_pylist()))
    return found


def recut(batches: list[pa.Table], cuts: list[int]) -> list[pa.Table]:
    lines = pa.concat_tables(batches)
    bounds = sorted({0, lines.num_rows, *[c % (lines.num_rows + 1) for c in cuts]})
    return [lines.slice(a, b - a) for a, b in zip(bounds[:-1], bounds[1:])]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    batches=random_logs(),
    join_settings=join_settings_strategy,
    cuts=st.lists(st.integers(0, 200), max_size=6),
    restart=st.booleans(),
)
def test_the_same_rows_whatever_the_micro_batch_cuts_and_restarts(batches, join_settings, cuts, restart):
    steps, state = run_stream(batches, join_settings)
    pieces = recut(batches, cuts)
    if restart and len(pieces) > 1:  # stop after the first piece, restart from the state's one-table form
        first, middle = run_stream(pieces[:1], join_settings)
        rest, final = run_stream(pieces[1:], join_settings, join_state_from_table(join_state_table(middle)))
        other = (first + rest, final)
    else:
        other = run_stream(pieces, join_settings)
    assert outputs(*other) == outputs(steps, state)


def dispositions(batches: list[pa.Table], steps, state: JoinState) -> dict:
    """Every line's places among the stream's outputs (a line in several matched pairs counts once)."""
    places: dict[tuple, list[str]] = {}

    def put(table, name, prefix=""):
        for line in set(zip(table[f"{prefix}segment"].to_pylist(), table[f"{prefix}line_number"].to_pylist())):
            places.setdefault(line, []).append(name)

    for name in ("unpaid", "orphans", "late", "duplicates", "dead_letters"):
        put(concat(steps, name), name)
    put(concat(steps, "matched"), "matched", "order_")
    put(concat(steps, "matched"), "matched", "payment_")
    held = pa.concat_tables([state.orders, state.payments])
    put(held.filter(pa.compute.invert(held["matched"])), "pending")
    for line in (
        pa.concat_tables(batches).filter(pa.compute.field("heartbeat")).select(["segment", "line_number"]).to_pylist()
    ):
        places.setdefault((line["segment"], line["line_number"]), []).append("heartbeat")
    return places


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batches=random_logs(), join_settings=join_settings_strategy)
def test_every_line_ends_in_exactly_one_place_and_every_difference_from_the_truth_has_a_reason(batches, join_settings):
    steps, state = run_stream(batches, join_settings)
    places = dispositions(batches, steps, state)
    lines = pa.concat_tables(batches)
    assert sorted(places) == sorted(zip(lines["segment"].to_pylist(), lines["line_number"].to_pylist()))
    assert all(len(where) == 1 for where in places.values()), places
    assert sum(s.input_lines for s in steps) == lines.num_rows

    truth = truth_side(batches, join_settings.bound)
    stream = stream_side(steps, state, len(batches))
    # the stream invents no pair: one the truth lacks holds a copy it re-counted after forgetting
    # its first copy (beyond the dedup horizon; a conflicting payload can then be on time)
    recounted = set(truth.fates())
    assert all(
        order in recounted or payment in recounted for order, payment in set(stream.pairs()) - set(truth.pairs())
    )
    assert reconcile_join(truth, stream).unexplained == 0


def test_the_state_holds_an_order_only_until_the_watermark_passes_its_interval():
    join_settings = JoinSettings(bound=15 * MINUTE, watermark_delay=0)
    batches = [
        parse_order_lines(raw(1, [event("o1", "order", "A", 0, 0)])),
        parse_order_lines(raw(2, [event("x", "order", "Z", 15, 1)])),
        parse_order_lines(raw(3, [event("y", "order", "Z", 16, 2)])),  # W = 15: o1 still held (15 is in [0, 15])
        parse_order_lines(raw(4, [heartbeat(3)])),  # W = 16 > 15: o1 final, unpaid
    ]
    steps, state = run_stream(batches, join_settings)
    assert [s.state.orders.num_rows for s in steps] == [1, 2, 3, 2]
    assert [s.unpaid["event_id"].to_pylist() for s in steps] == [[], [], [], ["o1"]]
    assert steps[-1].state_rows == 2 + 3  # x and y held, three first copies remembered


# ----------------------------------------------------------------------------- through Spark


def test_the_batch_rule_through_spark_partitioned_by_order_id(spark):
    from pyspark.sql import functions as F

    from lklab.pipelines.order_payments.parse import parse_order_events, valid_order_events
    from lklab.pipelines.order_payments.rule import (
        batch_interval_join,
        mark_order_duplicates,
        outcome_result,
    )
    from shared.dedup import first_copies
    from tests.conftest import raw_frame

    lines = [
        event("o1", "order", "A", 0, 0),
        event("p1", "payment", "A", 15, 1),
        event("p1", "payment", "A", 15, 2),
        event("o2", "order", "B", 10, 3),
        event("p9", "payment", "C", 1, 4),
        "{oops",
        heartbeat(5),
    ]
    parsed = raw_frame(spark, lines).transform(parse_order_events)
    assert parsed.where(F.col("reject_reason").isNotNull()).select("reject_reason").collect()[0][0] == "not_json"
    outcomes = valid_order_events(parsed).transform(mark_order_duplicates).transform(first_copies)
    result = outcome_result(batch_interval_join(outcomes, 15 * MINUTE).toArrow())
    expected = join_log(parse_order_lines(raw(1, lines)), 15 * MINUTE).result
    assert result.matched.to_pylist() == expected.matched.to_pylist() and result.matched.num_rows == 1
    assert result.unpaid["event_id"].to_pylist() == ["o2"] and result.orphans["event_id"].to_pylist() == ["p9"]


# ----------------------------------------------------------------------------- generated logs


def read_log(lake) -> list[pa.Table]:
    from shared.eventlog import EventLog

    log = EventLog(lake)
    return [parse_order_lines(raw(s.number, EventLog.read_lines(s.path))) for s in log.segments()]


def test_a_generated_log_against_its_oracle_through_the_batch_rule_and_the_stream(tmp_path):
    from collections import Counter

    from lklab.pipelines.order_payments.generator import (
        OrderPaymentParams,
        generate_order_payments,
    )
    from lklab.pipelines.order_payments.truth import join_truth

    params = OrderPaymentParams(
        orders=800, span=3 * 60 * MINUTE, segment_interval=5 * MINUTE, malformed_rate=0.01, retry_rate=0.05
    )
    generated = generate_order_payments(params, tmp_path / "a")
    generate_order_payments(params, tmp_path / "b")
    assert [p.read_bytes() for p in sorted((tmp_path / "a" / "log").iterdir())] == [
        p.read_bytes() for p in sorted((tmp_path / "b" / "log").iterdir())
    ]

    batches, bound = read_log(tmp_path / "a"), 15 * MINUTE
    lines = pa.concat_tables(batches)
    assert lines.num_rows == generated.manifest["lines"]
    reasons = Counter(r for r in lines["reject_reason"].to_pylist() if r)
    assert dict(reasons) == generated.manifest["dead_letters"]

    oracle = join_truth(generated.events, bound)
    truth = join_log(lines, bound)
    pairs = set(
        zip(truth.result.matched["order_event_id"].to_pylist(), truth.result.matched["payment_event_id"].to_pylist())
    )
    assert pairs == oracle.matched and len(pairs) > 600
    assert set(truth.result.unpaid["event_id"].to_pylist()) == oracle.unpaid
    assert set(truth.result.orphans["event_id"].to_pylist()) == oracle.orphans
    assert truth.duplicates.num_rows == generated.manifest["retries"]

    steps, state = run_stream(batches, JoinSettings(bound=bound, watermark_delay=MINUTE))
    found = reconcile_join(truth_side(batches, bound), stream_side(steps, state, len(batches)))
    assert found.unexplained == 0
    assert {"late_order", "late_payment", "pending"} <= set(found.by_reason)
    assert max(s.state_rows for s in steps) < lines.num_rows / 2  # the state is bounded, not the log


def test_the_finance_audit_lists_unpaid_orders_and_late_payments_with_formulas_neutralised():
    from lklab.pipelines.order_payments.audit import payments_audit_csv

    batches = [
        parse_order_lines(raw(1, [event("o1", "order", "=SUM(A1)", 0, 0, amount="40.5")])),
        parse_order_lines(raw(2, [event("x", "order", "B", 30, 1)])),
        parse_order_lines(
            raw(3, [event("p1", "payment", "=SUM(A1)", 5, 2, amount="40.50")])
        ),  # W = 30 > 5: late; o1 closed
    ]
    steps, _ = run_stream(batches, JoinSettings(bound=15 * MINUTE, watermark_delay=0))
    assert payments_audit_csv(concat(steps, "unpaid"), concat(steps, "late")) == (
        "record,event_id,order_id,currency,amount,event_time,ingest_time,watermark,lateness_seconds\n"
        "unpaid_order,o1,'=SUM(A1),EUR,40.500000,2026-01-05T10:00:00.000000Z,2026-01-05T20:00:00.000000Z,2026-01-05T10:30:00.000000Z,\n"
        "late_payment,p1,'=SUM(A1),EUR,40.500000,2026-01-05T10:05:00.000000Z,2026-01-05T20:00:02.000000Z,2026-01-05T10:30:00.000000Z,1500.000000\n"
    )


def test_the_catalog_names_every_table_of_the_pipeline_once_with_the_rows_the_step_writes():
    import importlib

    from lklab.pipelines import REGISTRY
    from lklab.pipelines.order_payments.tables import (
        PAYMENTS_BATCH_TABLES,
        PAYMENTS_DEAD_LETTER,
        PAYMENTS_DUPLICATES,
        PAYMENTS_LATE_EVENTS,
        PAYMENTS_MATCHED,
        PAYMENTS_ORPHANS,
        PAYMENTS_STATE,
        PAYMENTS_TABLES,
        PAYMENTS_UNPAID,
    )
    from reconciliation import tables as reconciliation_tables
    from shared import catalog

    owners = [catalog, reconciliation_tables]
    for name in REGISTRY:
        try:
            owners.append(importlib.import_module(f"lklab.pipelines.{name}.tables"))
        except ModuleNotFoundError:  # a pipeline whose tables are the catalog's
            pass
    names = [t.name for t in (*PAYMENTS_TABLES, *PAYMENTS_BATCH_TABLES)]
    every = [v.name for owner in owners for v in vars(owner).values() if isinstance(v, catalog.Table)]
    assert len(set(names)) == len(names) and all(every.count(n) == 1 for n in names)
    assert len(set(every)) == len(every)  # no two tables of the lake share a name
    batches = transcript_batches(yaml.safe_load(TRANSCRIPTS[0].read_text())["segments"])
    steps, state = run_stream(batches, JoinSettings(watermark_delay=0))
    for table, rows in [
        (PAYMENTS_MATCHED, "matched"),
        (PAYMENTS_UNPAID, "unpaid"),
        (PAYMENTS_ORPHANS, "orphans"),
        (PAYMENTS_LATE_EVENTS, "late"),
        (PAYMENTS_DUPLICATES, "duplicates"),
        (PAYMENTS_DEAD_LETTER, "dead_letters"),
    ]:
        assert concat(steps, rows).schema == table.schema, table.name
    assert join_state_table(state).schema == PAYMENTS_STATE.schema

"""The stream's micro-batch step on hand-made Arrow batches (no Spark): exact window changes,
dedup against the remembered first copies, sessions, and, over random logs, the same rows
whatever micro-batches the log is cut into and across restarts from the committed state."""

from collections import Counter
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shared.batch_chain import window_totals_table
from shared.events import EVENT_SCHEMA
from shared.speed import StreamSettings, stream_step
from shared.stream_state import StreamState, state_from_table, state_table
from shared.windows import SessionWindows, SlidingWindows, TumblingWindows

BASE = datetime(2026, 1, 5, 10, 0, tzinfo=UTC)
SECOND = 1_000_000
PARSED_SCHEMA = pa.schema(
    [
        *EVENT_SCHEMA,
        pa.field("raw_line", pa.string()),
        pa.field("reject_reason", pa.string()),
        pa.field("reject_detail", pa.string()),
        pa.field("heartbeat", pa.bool_()),
    ]
)


def at(seconds: float) -> datetime:
    return BASE + timedelta(seconds=seconds)


def seconds_of(moment: datetime) -> int:
    return int((moment - BASE).total_seconds())


def line(segment, number, kind, event_id=None, seconds=0, ingest=None, account="u1", amount="1.00") -> dict:
    """One ``parse_events`` row: ``kind`` is event, heartbeat or bad (a dead letter)."""
    row = dict(
        segment=segment,
        line_number=number,
        event_id=None,
        account_id=None,
        event_type=None,
        amount=None,
        currency=None,
        event_time=None,
        ingest_time=None if ingest is None else at(ingest),
        raw_line="{}",
        reject_reason=None,
        reject_detail=None,
        heartbeat=kind == "heartbeat",
    )
    if kind == "event":
        row.update(
            event_id=event_id,
            account_id=account,
            event_type="adjustment",
            amount=Decimal(amount),
            currency="USD",
            event_time=at(seconds),
        )
    elif kind == "bad":
        row.update(raw_line="{", reject_reason="not_json")
    return row


def parsed(segment: int, events: list[tuple], bad: int = 0) -> pa.Table:
    """One segment, ingested at ``10_000 + segment`` seconds: events ``(id, seconds[, account[, amount]])``, then ``bad`` lines."""
    rows = [line(segment, n, "event", e, s, 10_000 + segment, *rest) for n, (e, s, *rest) in enumerate(events, start=1)]
    rows += [line(segment, n, "bad", ingest=10_000 + segment) for n in range(len(events) + 1, len(events) + bad + 1)]
    return pa.Table.from_pylist(rows, schema=PARSED_SCHEMA)


def run(settings_: StreamSettings, batches: list[pa.Table], *, history: bool = False, restart_after: int | None = None):
    state, steps = StreamState.empty(), []
    for batch_id, lines in enumerate(batches):
        step = stream_step(lines, state, settings_, batch_id, history=history)
        state = step.state
        if restart_after == batch_id:  # a new process: the state comes back from its table
            state = state_from_table(state_table(state))
        steps.append(step)
    return steps


def changes(step) -> list[tuple]:
    return sorted(
        (
            seconds_of(r["window_start"]),
            seconds_of(r["window_end"]),
            r["event_count"],
            r["status"],
            r["updated_batch_id"],
            r["_delete"],
        )
        for r in step.window_changes.to_pylist()
    )


TUMBLING = StreamSettings(
    TumblingWindows(60 * SECOND), watermark_delay=10 * SECOND, allowed_lateness=0, dedup_horizon=3600 * SECOND
)


def test_a_window_the_watermark_closes_without_new_events_gets_a_status_change_only():
    steps = run(TUMBLING, [parsed(1, [("a", 10)]), parsed(2, [("b", 100)]), parsed(3, [("c", 130)])])
    assert changes(steps[0]) == [(0, 60, 1, "open", 0, False)]
    assert changes(steps[1]) == [(60, 120, 1, "open", 1, False)]  # judged by 10 - 10: nothing final yet
    # segment 3's tick: the watermark is 100 - 10 = 90, so [0, 60) is final; its values (and
    # the batch that last changed them) stay as they were
    assert changes(steps[2]) == [(0, 60, 1, "final", 0, False), (120, 180, 1, "open", 2, False)]
    base = int(BASE.timestamp()) * SECOND
    assert [(s.watermark, s.next_watermark) for s in steps] == [
        (None, None),
        (base, base),
        (base + 90 * SECOND, base + 90 * SECOND),
    ]


def test_within_one_tick_the_watermark_stays_put_and_with_no_interval_it_moves_after_every_line():
    # both lines in one segment, ingested at the same second: one tick
    one_tick = run(TUMBLING, [parsed(1, [("a", 10), ("b", 100), ("c", 5)])])[0]
    assert one_tick.late_events.num_rows == 0 and one_tick.next_watermark is None
    every_line = StreamSettings(TUMBLING.window, 10 * SECOND, 0, 3600 * SECOND, watermark_interval=0)
    step = run(every_line, [parsed(1, [("a", 10), ("b", 100), ("c", 5)])])[0]
    # c comes after b: watermark 90 >= 60, so c is late for [0, 60)
    assert [(r["event_id"], seconds_of(r["watermark"])) for r in step.late_events.to_pylist()] == [("c", 90)]
    assert changes(step) == [(0, 60, 1, "final", 0, False), (60, 120, 1, "open", 0, False)]


def test_copies_are_recognised_against_the_remembered_first_copy():
    steps = run(
        TUMBLING,
        [parsed(1, [("a", 10, "u1", "1.00")]), parsed(2, [("a", 10, "u1", "1.00"), ("a", 10, "u1", "2.00")], bad=1)],
    )
    duplicates = steps[1].duplicates.to_pylist()
    assert [
        (d["segment"], d["line_number"], d["first_segment"], d["first_line_number"], d["payload_conflict"])
        for d in duplicates
    ] == [
        (2, 1, 1, 1, False),
        (2, 2, 1, 1, True),
    ]
    assert steps[1].outcomes.num_rows == 0 and steps[1].window_changes.num_rows == 0
    assert [(r["line_number"], r["reject_reason"], r["batch_id"]) for r in steps[1].dead_letters.to_pylist()] == [
        (3, "not_json", 1)
    ]


def test_a_copy_beyond_the_dedup_horizon_is_counted_again():
    horizon = StreamSettings(TUMBLING.window, 10 * SECOND, 0, dedup_horizon=60 * SECOND)
    steps = run(horizon, [parsed(1, [("a", 10)]), parsed(2, [("b", 200)]), parsed(3, [("a", 10), ("a", 10)])])
    # segment 3 is judged by 200 - 10 = 190 > 10 + 60: a is forgotten, its resend is a first copy
    # again (late: its window is long final), remembered from 190 on, and the copy after it is a
    # duplicate of that one
    assert [(r["event_id"], r["line_number"]) for r in steps[2].late_events.to_pylist()] == [("a", 1)]
    assert [
        (r["line_number"], r["first_segment"], r["first_line_number"]) for r in steps[2].duplicates.to_pylist()
    ] == [(2, 3, 1)]


def test_a_bridging_event_merges_two_sessions_and_deletes_their_rows():
    sessions = StreamSettings(
        SessionWindows(30 * SECOND), watermark_delay=60 * SECOND, allowed_lateness=0, dedup_horizon=3600 * SECOND
    )
    steps = run(sessions, [parsed(1, [("a", 0), ("b", 50)]), parsed(2, [("c", 25)])])
    assert changes(steps[0]) == [(0, 30, 1, "open", 0, False), (50, 80, 1, "open", 0, False)]
    assert changes(steps[1]) == [
        (0, 30, 0, "open", 0, True),
        (0, 80, 3, "open", 1, False),
        (50, 80, 0, "open", 0, True),
    ]


def test_history_has_a_row_per_change_at_the_processing_time_of_its_line():
    steps = run(
        TUMBLING, [parsed(1, [("a", 10), ("b", 20)]), parsed(2, [("c", 100)]), parsed(3, [("d", 130)])], history=True
    )
    rows = [
        (
            r["change"],
            seconds_of(r["window_start"]),
            r["event_count"],
            r["status"],
            seconds_of(r["processing_time"]),
            r["line_number"],
        )
        for step in steps
        for r in step.history.to_pylist()
    ]
    assert rows == [
        ("update", 0, 1, "open", 10_001, 1),
        ("update", 0, 2, "open", 10_001, 2),
        ("update", 60, 1, "open", 10_002, 1),
        ("final", 0, 2, "final", 10_003, None),  # the first line judged by 90: segment 3's
        ("update", 120, 1, "open", 10_003, 1),
    ]


# -------------------------------------------------------------------------------- the property

specs = st.sampled_from(
    [TumblingWindows(60 * SECOND), SlidingWindows(60 * SECOND, 20 * SECOND), SessionWindows(45 * SECOND)]
)
kinds = st.sampled_from(["event"] * 8 + ["heartbeat", "bad"])
lines_ = st.lists(
    st.tuples(
        kinds,
        st.integers(0, 12),
        st.integers(0, 900),
        st.sampled_from(["u1", "u2"]),
        st.integers(1, 999),
        st.integers(-3, 20),
        st.booleans(),
    ),
    min_size=1,
    max_size=40,
)


def random_log(drawn, per_segment: int) -> list[pa.Table]:
    """Segments of lines whose ingest time mostly grows, sometimes goes back or is missing."""
    ingest, rows = 10_000, []
    for kind, event, seconds, account, cents, step, missing in drawn:
        ingest += step
        rows.append(
            (kind, f"e{event}", seconds, account, f"{cents / 100:.2f}", None if (missing and kind == "bad") else ingest)
        )
    segments = []
    for number, first in enumerate(range(0, len(rows), per_segment), start=1):
        chunk = rows[first : first + per_segment]
        segments.append(
            pa.Table.from_pylist(
                [line(number, k + 1, kind, e, s, i, a, m) for k, (kind, e, s, a, m, i) in enumerate(chunk)],
                schema=PARSED_SCHEMA,
            )
        )
    return segments


def outcome(steps) -> dict:
    """Everything the stream wrote, bookkeeping (batch ids) aside, and its final state."""
    served: dict[tuple, tuple] = {}
    for step in steps:
        for r in step.window_changes.to_pylist():
            key = (r["window_start"], r["window_end"], r["account_id"], r["currency"])
            if r["_delete"]:
                served.pop(key, None)
            else:
                served[key] = (r["event_count"], r["amount_total"], r["status"], r["updated_ingest_time"])
    strip = lambda table: Counter(
        tuple(v for k, v in row.items() if k not in ("batch_id", "updated_batch_id")) for row in table.to_pylist()
    )
    total = lambda name: sum(
        (strip(getattr(step, name)) for step in steps if getattr(step, name) is not None), Counter()
    )
    state = steps[-1].state
    return {
        "windows": served,
        "late": total("late_events"),
        "duplicates": total("duplicates"),
        "dead_letters": total("dead_letters"),
        "history": total("history"),
        "held": strip(state.windows),
        "remembered": strip(state.remembered),
        "clock": state.clock,
    }


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    specs,
    lines_,
    st.integers(1, 5),
    st.sampled_from([0, 30 * SECOND]),
    st.sampled_from([5 * SECOND, 60 * SECOND]),
    st.sampled_from([0, SECOND, 7 * SECOND]),
    st.sampled_from([120 * SECOND, 100_000 * SECOND]),
    st.data(),
)
def test_the_same_rows_whatever_the_micro_batches_and_restarts(
    spec, drawn, per_segment, lateness, delay, interval, horizon, data
):
    """One segment per micro-batch, random cuts with a restart from the state table in the
    middle, and the whole log in one batch: the same windows, side output, duplicates, dead
    letters, history and state. Every line lands once; money is conserved."""
    settings_ = StreamSettings(spec, delay, lateness, horizon, watermark_interval=interval)
    segments = random_log(drawn, per_segment)
    finest = run(settings_, segments, history=True)
    cuts = sorted(set(data.draw(st.lists(st.integers(1, max(1, len(segments) - 1)), max_size=4))))
    bounds = [0, *[c for c in cuts if c < len(segments)], len(segments)]
    batches = [pa.concat_tables(segments[a:b]) for a, b in zip(bounds[:-1], bounds[1:])]
    cut = run(settings_, batches, history=True, restart_after=data.draw(st.integers(0, len(batches) - 1)))
    whole = run(settings_, [pa.concat_tables(segments)], history=True)
    expected = outcome(finest)
    assert outcome(cut) == expected
    assert outcome(whole) == expected

    for step in finest:  # every line in exactly one place
        assert (
            step.input_lines
            == step.outcomes.num_rows + step.duplicates.num_rows + step.dead_letters.num_rows + step.heartbeats
        )


@settings(max_examples=40, deadline=None)
@given(specs, lines_, st.integers(1, 6), st.sampled_from([0, 30 * SECOND]), st.sampled_from([5 * SECOND, 60 * SECOND]))
def test_fixed_windows_plus_side_output_equal_the_batch_rule(spec, drawn, per_segment, lateness, delay):
    """With a horizon longer than the log, the stream's windows plus its late side output are
    the batch rule over the first copies (sessions: counts and money only, since a late event
    that would have bridged two sessions is folded back by recomputing them)."""
    settings_ = StreamSettings(spec, delay, lateness, 100_000 * SECOND)
    steps = run(settings_, random_log(drawn, per_segment))
    served = outcome(steps)["windows"]
    late = [r for step in steps for r in step.late_events.to_pylist()]
    firsts = {}
    events = [
        r
        for seg in random_log(drawn, per_segment)
        for r in seg.to_pylist()
        if r["event_id"] and not r["heartbeat"] and r["reject_reason"] is None
    ]
    for r in events:
        firsts.setdefault(r["event_id"], r)
    truth_events = pa.Table.from_pylist(
        [{k: r[k] for k in EVENT_SCHEMA.names} for r in firsts.values()], schema=EVENT_SCHEMA
    )
    truth = {
        (r["window_start"], r["window_end"], r["account_id"], r["currency"]): (r["event_count"], r["amount_total"])
        for r in window_totals_table(spec, truth_events).to_pylist()
    }
    money = sum((v[1] for v in served.values()), Decimal(0)) + sum((r["amount"] for r in late), Decimal(0))
    if isinstance(spec, SessionWindows):
        assert sum(v[0] for v in served.values()) + len(late) == len(firsts)
        assert money == sum((r["amount"] for r in firsts.values()), Decimal(0))
        return
    combined = {key: [value[0], value[1]] for key, value in served.items()}
    for r in late:
        count, total = combined.get((r["window_start"], r["window_end"], r["account_id"], "USD"), [0, Decimal(0)])
        combined[(r["window_start"], r["window_end"], r["account_id"], "USD")] = [count + 1, total + r["amount"]]
    assert {k: tuple(v) for k, v in combined.items()} == truth


@settings(max_examples=200, deadline=None)
@given(lines_, st.integers(1, 5), st.sampled_from([0, SECOND, 7 * SECOND]))
def test_the_clock_at_every_segment_boundary_follows_from_two_pseudo_lines_per_segment(drawn, per_segment, interval):
    """How the replay finds the clock's state without a pass in log order: per segment, the two
    pseudo-lines of ``tick_summary`` carry the state exactly as the lines do."""
    import numpy as np

    from shared.clock import ClockSettings, ClockState, advance, line_keys, tick_summary

    settings_ = ClockSettings(10 * SECOND, interval)
    state, summary_state = ClockState(), ClockState()
    for segment in random_log(drawn, per_segment):
        keys = line_keys(segment["segment"].to_numpy(), segment["line_number"].to_numpy())
        ingest = (
            segment["ingest_time"].cast(pa.int64()).fill_null(np.iinfo(np.int64).min).to_numpy(zero_copy_only=False)
        )
        events = np.where(
            segment["event_id"].is_valid().to_numpy(zero_copy_only=False)
            & ~segment["heartbeat"].to_numpy(zero_copy_only=False),
            segment["event_time"].cast(pa.int64()).fill_null(0).to_numpy(zero_copy_only=False),
            np.iinfo(np.int64).min,
        )
        pseudo = tick_summary(ClockState(processing_time=state.processing_time), settings_, keys, ingest, events)
        summary_state = advance(summary_state, settings_, *pseudo).state
        state = advance(state, settings_, keys, ingest, events).state
        assert summary_state == state

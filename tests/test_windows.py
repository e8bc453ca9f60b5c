"""Window assignment at boundaries, sliding windows and sessions, with exact expected windows."""

from datetime import datetime, timedelta

import pytest

from shared.windows import SessionWindows, SlidingWindows, TumblingWindows, assign_windows, window_spec

T0 = datetime(2026, 1, 5, 10, 0, 0)
MIN = 60_000_000


def events(spark, rows):
    """rows: (event_id, account_id, seconds after T0)."""
    data = [(eid, acct, "USD", T0 + timedelta(seconds=s)) for eid, acct, s in rows]
    return spark.createDataFrame(data, "event_id string, account_id string, currency string, event_time timestamp")


def windows_of(df):
    return sorted(
        (r.event_id, int((r.window_start - T0).total_seconds()), int((r.window_end - T0).total_seconds()))
        for r in df.collect()
    )


def test_tumbling_is_half_open(spark):
    df = events(spark, [("a", "x", 0), ("b", "x", 59.999999), ("c", "x", 60), ("d", "x", -0.000001)])
    assert windows_of(df.transform(assign_windows(TumblingWindows(MIN)))) == [
        ("a", 0, 60),
        ("b", 0, 60),
        ("c", 60, 120),
        ("d", -60, 0),
    ]


def test_tumbling_aligned_to_epoch_also_before_1970(spark):
    data = [("a", "x", "USD", datetime(1969, 12, 31, 23, 59, 30))]
    df = spark.createDataFrame(data, "event_id string, account_id string, currency string, event_time timestamp")
    row = df.transform(assign_windows(TumblingWindows(MIN))).first()
    assert (row.window_start, row.window_end) == (datetime(1969, 12, 31, 23, 59), datetime(1970, 1, 1))


def test_sliding_windows(spark):
    spec = SlidingWindows(size=2 * MIN, slide=MIN // 2)
    df = events(spark, [("a", "x", 0), ("b", "x", 45)])
    assert windows_of(df.transform(assign_windows(spec))) == [
        ("a", -90, 30),
        ("a", -60, 60),
        ("a", -30, 90),
        ("a", 0, 120),
        ("b", -60, 60),
        ("b", -30, 90),
        ("b", 0, 120),
        ("b", 30, 150),
    ]


def test_sliding_with_slide_not_dividing_size(spark):
    spec = SlidingWindows(size=50_000_000, slide=20_000_000)
    df = events(spark, [("a", "x", 0), ("b", "x", 10)])
    assert windows_of(df.transform(assign_windows(spec))) == [
        ("a", -40, 10),
        ("a", -20, 30),
        ("a", 0, 50),
        ("b", -20, 30),
        ("b", 0, 50),
    ]


def test_sessions_per_key_close_after_the_gap(spark):
    spec = SessionWindows(gap=5 * MIN)
    df = events(
        spark,
        [("a", "x", 0), ("b", "x", 200), ("c", "x", 499.999999), ("d", "x", 1000), ("e", "x", 1300), ("f", "y", 100)],
    )
    got = windows_of(df.transform(assign_windows(spec)))
    # c is less than 5 minutes after b; d is more than 5 minutes after c; e exactly 5 minutes after d.
    assert [(e, s) for e, s, _ in got] == [("a", 0), ("b", 0), ("c", 0), ("d", 1000), ("e", 1300), ("f", 100)]
    ends = {e: end for e, _, end in got}
    assert ends["a"] == ends["c"] == 799 and ends["d"] == 1300 and ends["e"] == 1600 and ends["f"] == 400


def test_specs_reject_bad_values():
    with pytest.raises(ValueError, match="valid: tumbling, sliding, session"):
        window_spec("hopping", size=MIN, gap=MIN)
    with pytest.raises(ValueError, match="longer than zero"):
        TumblingWindows(0)
    with pytest.raises(ValueError, match="must not exceed"):
        SlidingWindows(MIN, 2 * MIN)
    assert window_spec("sliding", size=MIN, slide=None, gap=MIN) == SlidingWindows(MIN, MIN)


def test_each_kind_answers_for_itself():
    """What differs between the kinds is asked of the window, never of its kind."""
    tumbling, sliding, session = TumblingWindows(MIN), SlidingWindows(2 * MIN, MIN), SessionWindows(MIN)
    kinds = (tumbling, sliding, session)
    assert [w.pick(fixed="fixed", merging="merging") for w in kinds] == ["fixed", "fixed", "merging"]
    assert [w.overlaps for w in kinds] == [False, True, False]  # only sliding counts an event twice
    assert [w.settings for w in kinds] == [("window-size",), ("window-size", "window-slide"), ("session-gap",)]
    assert tumbling.require_fixed("a rule") is tumbling and sliding.require_fixed("a rule") is sliding
    with pytest.raises(ValueError, match="^a rule: window-kind must be tumbling or sliding, not session$"):
        session.require_fixed("a rule")


def test_tumbling_is_sliding_by_its_own_size():
    """The fixed-window rule, the general one and tumbling's one-window shortcut, agree."""
    import pyarrow as pa

    times = [-MIN - 1, -1, 0, 1, MIN - 1, MIN, 5 * MIN + 7]
    events = pa.table({"event_time": pa.array(times, pa.int64()).cast(pa.timestamp("us", tz="UTC"))})
    assert TumblingWindows(MIN).assign(events).to_pylist() == SlidingWindows(MIN, MIN).assign(events).to_pylist()
    starts = TumblingWindows(MIN).assign(events)["window_start"].cast(pa.int64()).to_pylist()
    assert starts == [-2 * MIN, -MIN, 0, 0, 0, MIN, 5 * MIN]


@pytest.mark.parametrize(
    "spec",
    [TumblingWindows(MIN), SlidingWindows(size=5 * MIN, slide=MIN), SlidingWindows(size=50_000_000, slide=20_000_000)],
    ids=["tumbling", "sliding", "sliding-uneven"],
)
def test_fixed_windows_in_spark_are_the_arrow_rule(spark, spec):
    """The rule written in Arrow and the same rule as Spark columns give the same (event, window)
    rows: on boundaries, a microsecond either side, before 1970, and at random times."""
    import random

    import pyarrow as pa

    from shared.windows import assign_windows_table

    step = spec.step
    edges = [n * step + d for n in (-3, -1, 0, 1, 7, 29_512_345) for d in (-1, 0, 1)] + [
        spec.size - 1,
        spec.size,
        spec.size + 1,
    ]
    rng = random.Random(18)
    times = edges + [rng.randrange(-(10**15), 10**16) for _ in range(300)]
    rows = [(f"e{i}", t) for i, t in enumerate(times)]
    table = pa.table(
        {"event_id": [r[0] for r in rows], "event_time": pa.array([r[1] for r in rows], pa.timestamp("us", tz="UTC"))}
    )

    arrow = assign_windows_table(spec, table)
    expected = sorted(
        zip(
            arrow["event_id"].to_pylist(),
            *[arrow[c].cast(pa.int64()).to_pylist() for c in ("window_start", "window_end")],
        )
    )
    frame = spark.createDataFrame(table)
    got = sorted(
        (r.event_id, r.start, r.end)
        for r in spec.in_spark(frame)
        .selectExpr("event_id", "unix_micros(window_start) AS start", "unix_micros(window_end) AS end")
        .collect()
    )
    assert got == expected and len(got) >= len(times)

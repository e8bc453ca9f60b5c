"""The ``unique_visitors`` rule and stream step on hand-made Arrow rows (no Spark), the state
TTL, the generator against the oracle, and, over random logs, the same rows whatever the
micro-batch cuts, conservation of lines and pairs, and corrected == the batch rule."""

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lklab.pipelines.unique_visitors.generator import (
    PageViewParams,
    draw_page_views,
    generate_page_views,
    load_page_views,
)
from lklab.pipelines.unique_visitors.parse import PAGE_VIEW_COLUMNS, PAYLOAD_COLUMNS
from lklab.pipelines.unique_visitors.reconcile_rule import reconcile_distinct
from lklab.pipelines.unique_visitors.rule import (
    distinct_url_counts_table,
    distinct_url_members_table,
    first_views,
    require_fixed,
)
from lklab.pipelines.unique_visitors.state import state_from_table, state_table
from lklab.pipelines.unique_visitors.step import VisitorSettings
from lklab.pipelines.unique_visitors.truth import truth_members as oracle_members
from shared.dedup import mark_duplicates_table
from shared.eventlog import EventLog
from shared.windows import SessionWindows, SlidingWindows, TumblingWindows
from tests.visitor_lines import (
    SECOND,
    at,
    concat,
    row,
    run,
    seconds_of,
    segment_rows,
    served,
    served_table,
    table,
    url,
)

TUMBLING = VisitorSettings(
    TumblingWindows(10 * SECOND), watermark_delay=0, allowed_lateness=0, dedup_horizon=3600 * SECOND
)


def views_table(views: list[tuple]) -> pa.Table:
    """First copies ``(event_id, user, page, seconds)`` in log order (segment 1)."""
    rows = [
        dict(segment=1, line_number=n, event_id=i, user_id=u, url=url(p), event_time=at(t), ingest_time=at(t))
        for n, (i, u, p, t) in enumerate(views, start=1)
    ]
    return pa.Table.from_pylist(rows)


def test_members_are_the_distinct_urls_and_the_first_view_names_each():
    views = views_table(
        [
            ("a", "u1", "home", 1),
            ("b", "u1", "home", 2),
            ("c", "u1", "cart", 3),
            ("d", "u2", "home", 4),
            ("e", "u1", "home", 12),
        ]
    )
    members = distinct_url_members_table(TumblingWindows(10 * SECOND), views)
    assert [
        (seconds_of(r["window_start"]), r["user_id"], r["url"], r["views"], r["first_line_number"])
        for r in members.to_pylist()
    ] == [
        (0, "u1", url("cart"), 1, 3),
        (0, "u1", url("home"), 2, 1),
        (0, "u2", url("home"), 1, 4),
        (10, "u1", url("home"), 1, 5),
    ]
    counts = distinct_url_counts_table(members)
    assert [(seconds_of(r["window_start"]), r["user_id"], r["distinct_urls"]) for r in counts.to_pylist()] == [
        (0, "u1", 2),
        (0, "u2", 1),
        (10, "u1", 1),
    ]


def test_first_views_marks_the_first_row_of_each_member_in_the_order_given():
    pairs = pa.table(
        {
            "window_start": [0, 0, 0, 5],
            "window_end": [5, 5, 5, 10],
            "user_id": ["u", "u", "v", "u"],
            "url": ["x", "x", "x", "x"],
        }
    )
    assert first_views(pairs).tolist() == [True, False, True, True]


def test_sessions_are_refused_with_the_valid_kinds_named():
    with pytest.raises(ValueError, match="tumbling or sliding"):
        require_fixed(SessionWindows(60 * SECOND))
    with pytest.raises(ValueError, match="tumbling or sliding"):
        VisitorSettings(SessionWindows(60 * SECOND), 0, 0, 0)


def test_a_repeat_keeps_the_count_and_moves_last_seen_on():
    steps = run(
        TUMBLING, [table(segment_rows(1, [{"id": "a", "t": 1}])), table(segment_rows(2, [{"id": "b", "t": 2}]))]
    )
    assert [step.windows["distinct_urls"].to_pylist() for step in steps] == [[1], []]  # a repeat changes no served row
    assert steps[1].outcomes.select(["new_urls", "repeats", "late_pairs"]).to_pylist() == [
        {"new_urls": 0, "repeats": 1, "late_pairs": 0}
    ]
    entry = steps[1].state.members.to_pylist()[0]
    assert (entry["event_id"], entry["added_at"], entry["last_seen"]) == ("a", at(10_001), at(10_002))


def test_entries_leave_the_state_once_released_and_past_the_ttl():
    # home is seen at p = 10_001; the heartbeat at 10_003 brings W to 25, releasing [0, 10);
    # entries leave once p >= 10_001 + ttl: at once (ttl 0), at 10_006 (5 s), not yet (1 h)
    batches = [
        table(segment_rows(1, [{"id": "a", "t": 1}])),
        table(segment_rows(2, [{"id": "b", "t": 25, "url": "cart"}])),
        table([row(3, 1, "heartbeat", ingest=10_003)]),
        table([row(4, 1, "heartbeat", ingest=10_006)]),
    ]
    for ttl, expected in ((0, [1, 2, 1, 1]), (5 * SECOND, [1, 2, 2, 1]), (3600 * SECOND, [1, 2, 2, 2])):
        steps = run(VisitorSettings(TUMBLING.window, 0, 0, 3600 * SECOND, state_ttl=ttl), batches)
        assert [step.state_entries for step in steps] == expected, ttl
        assert served(steps) == served(run(TUMBLING, batches))


# ----------------------------------------------------------------------------- random logs


@st.composite
def logs(draw):
    """Segments of views (a few users and pages, event times behind or ahead), resends, bad lines."""
    segments, sent = [], []
    for index in range(1, draw(st.integers(1, 6)) + 1):
        rows = []
        for _ in range(draw(st.integers(0, 5))):
            if sent and draw(st.integers(0, 5)) == 0:
                event_id, user, page, t = draw(st.sampled_from(sent))  # an exact resend
            else:
                event_id, user, page, t = (
                    f"v{len(sent)}",
                    draw(st.sampled_from(["u1", "u2"])),
                    draw(st.sampled_from(["home", "cart", "shoe"])),
                    draw(st.integers(0, 60)),
                )
                sent.append((event_id, user, page, t))
            rows.append(
                row(
                    index,
                    len(rows) + 1,
                    "view",
                    event_id=event_id,
                    user=user,
                    page=page,
                    seconds=t,
                    ingest=10_000 + 3 * index,
                )
            )
        if draw(st.booleans()):
            rows.append(row(index, len(rows) + 1, "bad", ingest=10_000 + 3 * index))
        segments.append(rows)
    segments.append([row(len(segments) + 1, 1, "heartbeat", ingest=10_000 + 3 * len(segments) + 3)])
    return segments


def cut(segments: list[list[dict]], cuts: list[int]) -> list[pa.Table]:
    lines = [line for segment in segments for line in segment]
    points = sorted({c % (len(lines) + 1) for c in cuts} | {0, len(lines)})
    return [table(lines[a:b]) for a, b in zip(points, points[1:])]


SETTINGS = [
    VisitorSettings(
        TumblingWindows(10 * SECOND),
        watermark_delay=5 * SECOND,
        allowed_lateness=2 * SECOND,
        dedup_horizon=3600 * SECOND,
        state_ttl=4 * SECOND,
    ),
    VisitorSettings(
        SlidingWindows(10 * SECOND, 5 * SECOND),
        watermark_delay=0,
        allowed_lateness=0,
        dedup_horizon=3600 * SECOND,
        state_ttl=0,
    ),
]


def outputs(steps) -> dict:
    late = concat(steps, "late").drop(["batch_id"]).to_pylist()
    key = lambda r: (r["segment"], r["line_number"], r["window_start"])
    return {
        "served": served(steps),
        "members": sorted(concat(steps, "members").drop(["batch_id"]).to_pylist(), key=key),
        "late": sorted(late, key=key),
        "duplicates": sorted(
            concat(steps, "duplicates").drop(["batch_id"]).to_pylist(), key=lambda r: (r["segment"], r["line_number"])
        ),
        "dead_letters": concat(steps, "dead_letters")["line_number"].to_pylist(),
        "state": steps[-1].state.entries,
    }


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    segments=logs(), cuts=st.lists(st.integers(0, 200), max_size=4), which=st.integers(0, 1), restart=st.integers(0, 3)
)
def test_any_micro_batch_cut_and_restart_gives_the_same_rows_and_every_line_is_accounted_for(
    segments, cuts, which, restart
):
    settings_ = SETTINGS[which]
    per_segment = run(settings_, [table(s) for s in segments])
    other = run(settings_, cut(segments, cuts), restart_after=restart)
    assert outputs(other) == outputs(per_segment)

    steps = per_segment
    lines = sum(len(s) for s in segments)
    views = sum(step.outcomes.num_rows for step in steps)
    assert (
        sum(s.input_lines for s in steps)
        == lines
        == views + sum(s.heartbeats + s.dead_letters.num_rows + s.duplicates.num_rows for s in steps)
    )
    outcomes = concat(steps, "outcomes")
    assert (
        outcomes["pairs"].to_numpy()
        == outcomes["new_urls"].to_numpy() + outcomes["repeats"].to_numpy() + outcomes["late_pairs"].to_numpy()
    ).all()
    assert int(outcomes["new_urls"].to_numpy().sum()) == concat(steps, "members").num_rows
    assert int(outcomes["late_pairs"].to_numpy().sum()) == concat(steps, "late").num_rows

    # corrected (members ∪ late) == the batch rule over the log's first copies (the horizon is an hour: no copy escapes)
    all_lines = table([line for segment in segments for line in segment])
    views_only = all_lines.filter(
        pa.array([r["reject_reason"] is None and not r["heartbeat"] for r in all_lines.to_pylist()])
    )
    marked = mark_duplicates_table(views_only.select(list(PAGE_VIEW_COLUMNS)), PAYLOAD_COLUMNS)
    truth = distinct_url_members_table(
        settings_.window, marked.filter(pa.array(~marked["is_duplicate"].to_numpy(zero_copy_only=False)))
    )
    result = reconcile_distinct(
        served_table(steps), concat(steps, "members"), concat(steps, "late"), truth, read_through=len(segments)
    )
    assert result.proven, result.differences
    # the state TTL never changes what is served
    assert served(
        run(
            VisitorSettings(
                settings_.window,
                settings_.watermark_delay,
                settings_.allowed_lateness,
                settings_.dedup_horizon,
                state_ttl=10**12,
            ),
            [table(s) for s in segments],
        )
    ) == served(steps)


def test_state_round_trips_through_its_table():
    steps = run(TUMBLING, [table(segment_rows(1, [{"id": "a", "t": 1}, {"id": "b", "t": 2, "url": "cart"}]))])
    back = state_from_table(state_table(steps[0].state))
    assert back.clock == steps[0].state.clock
    assert back.members.equals(steps[0].state.members) and back.remembered.equals(steps[0].state.remembered)


def test_the_comparison_sweeps_the_configured_ttl_then_an_hour_ten_minutes_and_a_minute():
    from lklab.pipelines.unique_visitors.comparison import default_state_ttls

    assert default_state_ttls(24 * 3600 * SECOND) == ("1d", "1h", "10m", "1m")
    assert default_state_ttls(600 * SECOND) == ("10m", "1h", "1m")


# ----------------------------------------------------------------------------- the generator and its oracle


def test_the_oracle_and_the_rule_agree_on_generated_views():
    views, _ = draw_page_views(PageViewParams(views=3000, span=3600 * SECOND, users=30, pages=40))
    table_ = pa.table(
        {
            "segment": np.ones(len(views.event_ids), dtype=np.int64),
            "line_number": np.arange(len(views.event_ids), dtype=np.int64),
            "user_id": views.users,
            "url": views.urls,
            "event_time": pa.array(views.event_times).cast(pa.timestamp("us", tz="UTC")),
        }
    )
    for spec in (TumblingWindows(60 * SECOND), SlidingWindows(5 * 60 * SECOND, 60 * SECOND)):
        rule = distinct_url_members_table(spec, table_).select(["window_start", "window_end", "user_id", "url"])
        assert rule.equals(oracle_members(views, spec))
        repeats = distinct_url_members_table(spec, table_)["views"].to_numpy()
        assert (repeats > 1).any()  # the generated windows hold repeats, not only new URLs


def test_the_generator_is_deterministic_and_its_bad_lines_have_the_reasons_it_says(tmp_path):
    params = PageViewParams(views=500, span=1800 * SECOND, users=20, pages=30, malformed_rate=0.02)
    first = generate_page_views(params, tmp_path / "a")
    second = generate_page_views(params, tmp_path / "b")
    read = lambda lake: [line for segment in EventLog(lake).segments() for line in EventLog.read_lines(segment.path)]
    assert read(tmp_path / "a") == read(tmp_path / "b") and first == second
    assert (
        len(read(tmp_path / "a")) == first["lines"] == 500 + first["duplicates"] + sum(first["dead_letters"].values())
    )
    assert sum(first["dead_letters"].values()) == 10
    assert load_page_views(tmp_path / "a").event_ids.tolist() == draw_page_views(params)[0].event_ids.tolist()
    with pytest.raises(FileExistsError):
        generate_page_views(params, tmp_path / "a")

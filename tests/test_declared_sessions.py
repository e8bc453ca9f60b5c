"""A declared pipeline with session windows (``window-kind = "session"``, ``session-gap = "5m"``)
on hand-made meter readings, with exact expected rows: the stream's step over several cuts of
the log (sessions that merge, a session merged away deleted from the window table, a late
reading that would have bridged two sessions, allowed lateness, a resend inside a session), then
``ingest``, ``speed``, ``batch``, ``replay`` and ``reconcile`` in the tests' Spark session: the
truth is Spark's sessions, every line and every measure is conserved, the replay is the live
run, and the reconcile explains the sessions that differ by folding the late reading back in.

Every reading is received in a second of its own, so the watermark ``W`` a line is judged by is
the latest event time of the lines before it minus the ``watermark-delay`` of 2 minutes."""

from __future__ import annotations

import tomllib
from decimal import Decimal

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from lklab.cli import main
from lklab.pipelines.declared.declaration import declarations
from lklab.pipelines.declared.parse import parse_declared_lines
from lklab.pipelines.declared.rule import DeclaredState, declared_step, state_from_table, state_table
from lklab.pipelines.declared.tables import tables_of
from tests.conftest import cli_in_this_process
from tests.test_declared_jobs import late_rows, measures_conserved, raw, read, reading, replay_is_live, window_rows

DECLARATION = """
[pipelines.meter_sessions]
kind = "windowed"
event-id = "reading_id"
event-time = "read_at"
ingest-time = "received_at"
keys = ["meter", "region"]
window-kind = "session"
session-gap = "5m"
watermark-delay = "2m"

[pipelines.meter_sessions.measures]
kwh = "decimal(18,3)"
pulses = "long"
"""

SEGMENTS = [
    [
        reading("a1", "m1", "north", "00:00", "1.000", 10, "00:30"),  # W unknown: [10:00, 10:05)
        reading("b1", "m2", "south", "01:00", "2.000", 20, "01:30"),  # [10:01, 10:06)
        reading("b2", "m2", "south", "07:00", "1.000", 8, "07:10"),  # apart: [10:07, 10:12)
    ],
    [
        # W 10:05: [10:04, 10:09) overlaps both held sessions of m2, merged into [10:01, 10:12)
        reading("b3", "m2", "south", "04:00", "0.250", 3, "07:20"),
        reading("b3", "m2", "south", "04:00", "0.250", 3, "07:40"),  # a resend inside the session
        # W 10:05 >= 10:05: [10:00, 10:05) is no longer held (final); a new session [10:08, 10:13)
        reading("a2", "m1", "north", "08:00", "0.500", 5, "08:30"),
    ],
    [
        reading("b4", "m2", "south", "20:00", "0.125", 1, "20:10"),  # W 10:06: [10:20, 10:25)
        # W 10:18: no m1 session held, and its own [10:04, 10:09) closed: late. The truth's m1
        # session is [10:00, 10:13): a3 bridges a1's and a2's
        reading("a3", "m1", "north", "04:00", "0.300", 3, "20:30"),
        reading("r0", "m2", "south", "20:31", "abc", 1, "20:35"),  # a bad measure: a dead letter
        '{"heartbeat": true, "ingest_time": "2026-01-05T10:20:40Z"}',
    ],
    [
        reading("c1", "m3", "north", "21:00", "3.000", 24, "21:30"),  # W 10:18: [10:21, 10:26)
        reading("b5", "m2", "south", "23:00", "0.050", 1, "23:10"),  # W 10:19: joins, [10:20, 10:28)
        reading("d1", "m4", "north", "30:00", "0.010", 1, "30:10"),  # [10:30, 10:35)
        # exactly the gap after d1: the sessions touch and stay apart, in the stream and the truth
        reading("d2", "m4", "north", "35:00", "0.020", 2, "35:10"),
    ],
]

# (start, end, meter, region): count, kwh, pulses
STREAM = {
    ("10:00", "10:05", "m1", "north"): (1, Decimal("1.000"), 10),  # a1
    ("10:08", "10:13", "m1", "north"): (1, Decimal("0.500"), 5),  # a2 (a3 late)
    ("10:01", "10:12", "m2", "south"): (3, Decimal("3.250"), 31),  # b1 b3 b2 (b3's resend once)
    ("10:20", "10:28", "m2", "south"): (2, Decimal("0.175"), 2),  # b4 b5
    ("10:21", "10:26", "m3", "north"): (1, Decimal("3.000"), 24),  # c1
    ("10:30", "10:35", "m4", "north"): (1, Decimal("0.010"), 1),  # d1
    ("10:35", "10:40", "m4", "north"): (1, Decimal("0.020"), 2),  # d2
}
LATE = [("a3", "10:04", "10:09", "m1", "north", Decimal("0.300"), 3, "10:18")]
TRUTH = {
    **{k: v for k, v in STREAM.items() if k[2] != "m1"},
    ("10:00", "10:13", "m1", "north"): (3, Decimal("1.800"), 18),  # a1 a3 a2
}
CUTS = [[[1], [2], [3], [4]], [[1, 2, 3, 4]], [[1, 2], [3, 4]], [[1], [2, 3, 4]], [[1, 2, 3], [4]]]


def declaration(text: str = DECLARATION):
    return declarations(tomllib.loads(text))["meter_sessions"]


def apply(table: dict, changes: pa.Table) -> None:
    """A micro-batch's window rows applied as the sink merges them: a ``_delete`` row removes its session."""
    deleted = changes["_delete"].to_pylist()
    for (key, value), delete in zip(window_rows(changes.drop_columns(["_delete"])).items(), deleted):
        if delete:
            del table[key]
        else:
            table[key] = value


def walk(segments: list[list[str]], cuts: list[list[int]], text: str = DECLARATION):
    """The step over the log, one micro-batch per group of segments in ``cuts``, the state
    written to its table and read back between micro-batches as a restart would: the window
    table after each micro-batch, the late rows and the metrics' counts summed."""
    d = declaration(text)
    state, table, after, late, counts = DeclaredState(), {}, [], [], {}
    parsed = parse_declared_lines(d, raw(segments))
    for batch_id, cut in enumerate(cuts):
        lines = parsed.filter(pc.is_in(parsed["segment"], pa.array(cut, pa.int64())))
        batch = declared_step(d, lines, state, batch_id)
        state = state_from_table(d, state_table(d, batch.state))
        apply(table, batch.windows)
        after.append(dict(table))
        late += late_rows(batch.late)
        for k, v in batch.figures.items():
            if isinstance(v, int) and k not in ("first_segment", "last_segment"):
                counts[k] = counts.get(k, 0) + v
    return after, sorted(late), counts


@pytest.mark.parametrize("cuts", CUTS)
def test_sessions_merge_and_the_window_table_holds_them_whatever_the_cut(cuts):
    after, late, counts = walk(SEGMENTS, cuts)
    assert after[-1] == STREAM
    assert late == LATE
    assert counts == {
        "input_lines": 14,
        "events": 10,
        "late_events": 1,
        "duplicates": 1,
        "dead_letters": 1,
        "heartbeats": 1,
    }
    # after every micro-batch the table is what one micro-batch over the same segments leaves:
    # the sessions merged away in between are gone from it
    done = []
    for cut, table in zip(cuts, after):
        done += cut
        assert table == walk(SEGMENTS, [done])[0][-1], done


def test_a_session_merged_away_is_deleted_from_the_window_table():
    after, _, _ = walk(SEGMENTS, [[1], [2], [3], [4]])
    assert after[0] == {
        ("10:00", "10:05", "m1", "north"): (1, Decimal("1.000"), 10),
        ("10:01", "10:06", "m2", "south"): (1, Decimal("2.000"), 20),
        ("10:07", "10:12", "m2", "south"): (1, Decimal("1.000"), 8),
    }
    assert ("10:01", "10:06", "m2", "south") not in after[1] and ("10:07", "10:12", "m2", "south") not in after[1]
    assert after[1][("10:01", "10:12", "m2", "south")] == (3, Decimal("3.250"), 31)
    assert after[2][("10:20", "10:25", "m2", "south")] == (1, Decimal("0.125"), 1)
    assert ("10:20", "10:25", "m2", "south") not in after[3]


# One reading a segment. x4 comes at W 10:19: [10:14, 10:19) overlaps [10:10, 10:15), which is
# held while W < 10:15 + allowed lateness, and [10:18, 10:23), held either way.
LATENESS_LOG = [
    [reading("x1", "m1", "north", "10:00", "1.000", 1, "10:10")],  # [10:10, 10:15)
    [reading("x2", "m1", "north", "18:00", "0.200", 2, "18:10")],  # W 10:08: [10:18, 10:23)
    [reading("x3", "m9", "north", "21:00", "3.000", 3, "21:10")],  # W 10:16: [10:21, 10:26)
    [reading("x4", "m1", "north", "14:00", "0.040", 4, "21:20")],  # W 10:19
    [reading("x5", "m1", "north", "01:00", "0.500", 5, "21:30")],  # W 10:19 >= 10:06 (+ 5m): late
]
X5_LATE = [("x5", "10:01", "10:06", "m1", "north", Decimal("0.500"), 5, "10:19")]


@pytest.mark.parametrize("cuts", [[[1], [2], [3], [4, 5]], [[1, 2, 3, 4, 5]], [[1, 2], [3, 4], [5]]])
@pytest.mark.parametrize(
    "lateness, expected",
    [
        (
            None,  # [10:10, 10:15) is final at W 10:19: x4 joins [10:18, 10:23) alone
            {
                ("10:10", "10:15", "m1", "north"): (1, Decimal("1.000"), 1),
                ("10:14", "10:23", "m1", "north"): (2, Decimal("0.240"), 6),
                ("10:21", "10:26", "m9", "north"): (1, Decimal("3.000"), 3),
            },
        ),
        (
            "5m",  # held until W 10:20: x4 bridges both sessions
            {
                ("10:10", "10:23", "m1", "north"): (3, Decimal("1.240"), 7),
                ("10:21", "10:26", "m9", "north"): (1, Decimal("3.000"), 3),
            },
        ),
    ],
)
def test_allowed_lateness_keeps_a_session_held(cuts, lateness, expected):
    text = DECLARATION
    if lateness is not None:
        text = text.replace('watermark-delay = "2m"', f'watermark-delay = "2m"\nallowed-lateness = "{lateness}"')
    after, late, counts = walk(LATENESS_LOG, cuts, text)
    assert after[-1] == expected
    assert late == X5_LATE
    assert (counts["events"], counts["late_events"]) == (4, 1)


@pytest.fixture(scope="module")
def lab(spark, tmp_path_factory):
    """``ingest``, ``speed``, ``batch``, ``replay`` and ``reconcile`` (live, then the replay) in
    a lake of its own: (lake, exit codes, what each printed)."""
    import contextlib
    import io

    home = tmp_path_factory.mktemp("sessions")
    config, lake = home / "sessions.toml", home / "lake"
    config.write_text(DECLARATION)
    files = []
    for n, lines in enumerate(SEGMENTS, start=1):
        files.append(home / f"readings-{n}.jsonl")
        files[-1].write_text("\n".join(lines) + "\n")
    common = ["--pipeline", "meter_sessions", "--config", str(config), "--lake", str(lake)]
    commands = {
        "ingest": ["ingest", *common, *map(str, files)],
        "speed": ["speed", *common, "--available-now"],
        "batch": ["batch", *common],
        "replay": ["replay", *common, "--name", "again"],
        "reconcile": ["reconcile", *common],
        "reconcile again": ["reconcile", *common, "--against", "kappa:again"],
    }
    codes, printed = {}, {}
    for name, args in commands.items():
        out = io.StringIO()
        with cli_in_this_process(), contextlib.redirect_stdout(out):
            codes[name] = main(args)
        printed[name] = out.getvalue()
    return lake, codes, printed


def test_every_job_runs_and_every_line_is_in_one_place(lab):
    _, codes, printed = lab
    assert codes == dict.fromkeys(codes, 0), printed
    assert (
        "4 micro-batches: 14 lines = 10 events + 1 late events + 1 duplicates + 1 dead letters + 1 heartbeats "
        "(conserved); 7 windows in meter_sessions_windows" in printed["speed"]
    )
    assert "14 lines = 11 events + 1 duplicates + 1 dead letters + 1 heartbeats (conserved)" in printed["batch"]


def test_the_truth_is_sparks_sessions_and_the_stream_its_own(spark, lab):
    lake = lab[0]
    t = tables_of(declaration())
    assert window_rows(read(spark, lake, t.truth.name)) == TRUTH
    assert window_rows(read(spark, lake, t.windows.name)) == STREAM
    assert late_rows(read(spark, lake, t.late.name)) == LATE
    (duplicate,) = read(spark, lake, t.duplicates.name).to_pylist()
    assert (duplicate["event_id"], duplicate["first_segment"], duplicate["first_line_number"]) == ("b3", 2, 1)
    assert [r["event_id"] for r in read(spark, lake, t.batch_duplicates.name).to_pylist()] == ["b3"]


def test_every_measure_is_conserved(spark, lab):
    assert measures_conserved(spark, lab[0], declaration()) == 11


def test_the_replay_is_the_live_run(spark, lab):
    replay_is_live(spark, lab[0], declaration())


def test_the_reconcile_explains_the_sessions_a_late_reading_would_have_merged(lab):
    printed = lab[2]
    for name, against in (("reconcile", "speed"), ("reconcile again", "kappa:again")):
        assert printed[name].splitlines() == [
            f"meter_sessions: {against} (segments 1..4) against the truth (segments 1..4): windows match 5, "
            "value_mismatch 0, missing_in_stream 1, extra_in_stream 2",
            "totals: truth event_count 11, kwh 8.255, pulses 78; stream event_count 10, kwh 7.955, pulses 75; "
            "late event_count 1, kwh 0.300, pulses 3",
            "explained: 3 windows by their late events (truth = stream + late), 0 by segments the stream has not "
            "read yet",
            "unexplained: 0 windows",
        ]

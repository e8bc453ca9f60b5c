"""A declared pipeline (``meter_kwh``, a TOML section, no code) through every runner: ``lklab
ingest``, ``speed``, ``batch``, ``replay``, ``reconcile`` and ``tables`` with ``--pipeline
meter_kwh``, in process, in the tests' Spark session, on a hand-made log of meter readings with
exact expected rows. Every line lands in exactly one place, every measure's total is conserved
(truth = stream + late), the replay is the live run, and the reconcile explains each gap by its
late events. A live stream killed with SIGKILL at its crash points, then restarted, commits the
rows of one never killed."""

from __future__ import annotations

import json
import tomllib
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pytest

from lklab.cli import main
from lklab.pipelines.declared.declaration import declarations
from lklab.pipelines.declared.parse import parse_declared_lines
from lklab.pipelines.declared.rule import DeclaredState, declared_step
from lklab.pipelines.declared.tables import tables_of
from shared.micro_batch import TIMING_COLUMNS
from shared.tables import Tables
from tests.conftest import cli_in_this_process

DECLARATION = """
[pipelines.meter_kwh]
kind = "windowed"
event-id = "reading_id"
event-time = "read_at"
ingest-time = "received_at"
keys = ["meter", "region"]
window-size = "5m"
watermark-delay = "2m"

[pipelines.meter_kwh.measures]
kwh = "decimal(18,3)"
pulses = "long"

[pipelines.meter_kwh.fields.region]
values = ["north", "south"]
"""


def reading(reading_id: str, meter: str, region: str, read_at: str, kwh, pulses: int, received_at: str) -> str:
    return json.dumps(
        {
            "reading_id": reading_id,
            "meter": meter,
            "region": region,
            "read_at": f"2026-01-05T10:{read_at}Z",
            "kwh": kwh,
            "pulses": pulses,
            "received_at": f"2026-01-05T10:{received_at}Z",
        }
    )


SEGMENTS = [
    [
        reading("r01", "m1", "north", "00:30", "1.250", 10, "00:31"),
        reading("r02", "m2", "south", "01:00", "0.500", 4, "01:02"),
        reading("r03", "m1", "north", "02:00", "2.000", 16, "02:01"),
        reading("r04", "m2", "south", "03:30", "0.750", 6, "03:31"),
        reading("r05", "m1", "north", "04:10", "1.000", 8, "04:12"),
    ],
    [
        reading("r06", "m1", "north", "05:20", "0.250", 2, "05:21"),
        reading("r03", "m1", "north", "02:00", "2.000", 16, "05:40"),  # a resend: a duplicate
        reading("r07", "m2", "south", "06:00", "abc", 5, "06:01"),  # a bad measure: a dead letter
        reading("r08", "m2", "south", "07:30", "1.500", 12, "07:31"),
        reading("r09", "m1", "north", "08:00", "0.125", 1, "08:02"),
    ],
    [
        reading("r10", "m1", "north", "09:00", "0.500", 4, "09:01"),
        reading("r11", "m2", "south", "10:30", "2.250", 18, "10:31"),
        '{"heartbeat": true, "ingest_time": "2026-01-05T10:11:00Z"}',
        # watermark 10:10:30 - 2m = 10:08:30 >= 10:05, the end of its window: late
        reading("r12", "m2", "south", "04:00", "0.300", 3, "11:05"),
        reading("r13", "m1", "north", "11:40", "1.000", 8, "11:41"),
    ],
    [
        reading("r14", "m1", "north", "12:00", "0.750", 6, "12:01"),
        reading("r15", "m3", "north", "13:00", "3.000", 24, "13:02"),
        reading("r16", "m2", "south", "14:59", "0.050", 1, "15:00"),
        # watermark 10:14:59 - 2m = 10:12:59 >= 10:10, the end of its window: late
        reading("r17", "m1", "north", "06:30", "0.400", 3, "15:10"),
        reading("r18", "m1", "north", "14:00", "0.600", 5, "15:20"),
    ],
]


def w(start: str) -> tuple[str, str]:
    minute = int(start)
    return f"10:{minute:02d}", f"10:{minute + 5:02d}"


# (window, meter, region): count, kwh, pulses
STREAM = {
    (*w("00"), "m1", "north"): (3, Decimal("4.250"), 34),  # r01 r03 r05 (r03's resend counts once)
    (*w("00"), "m2", "south"): (2, Decimal("1.250"), 10),  # r02 r04 (r12 late)
    (*w("05"), "m1", "north"): (3, Decimal("0.875"), 7),  # r06 r09 r10 (r17 late)
    (*w("05"), "m2", "south"): (1, Decimal("1.500"), 12),  # r08 (r07 a dead letter)
    (*w("10"), "m1", "north"): (3, Decimal("2.350"), 19),  # r13 r14 r18
    (*w("10"), "m2", "south"): (2, Decimal("2.300"), 19),  # r11 r16
    (*w("10"), "m3", "north"): (1, Decimal("3.000"), 24),  # r15
}
LATE = [  # (event, window, watermark it was judged by)
    ("r12", *w("00"), "m2", "south", Decimal("0.300"), 3, "10:08:30"),
    ("r17", *w("05"), "m1", "north", Decimal("0.400"), 3, "10:12:59"),
]
TRUTH = {
    **STREAM,
    (*w("00"), "m2", "south"): (3, Decimal("1.550"), 13),
    (*w("05"), "m1", "north"): (4, Decimal("1.275"), 10),
}


def declaration():
    return declarations(tomllib.loads(DECLARATION))["meter_kwh"]


def hhmm(value) -> str:
    return f"{value:%H:%M}" if value.second == 0 else f"{value:%H:%M:%S}"


def window_rows(table: pa.Table) -> dict:
    return {
        (hhmm(r["window_start"]), hhmm(r["window_end"]), r["meter"], r["region"]): (
            r["event_count"],
            r["kwh"],
            r["pulses"],
        )
        for r in table.to_pylist()
    }


def late_rows(table: pa.Table) -> list:
    return sorted(
        (
            r["event_id"],
            hhmm(r["window_start"]),
            hhmm(r["window_end"]),
            r["meter"],
            r["region"],
            r["kwh"],
            r["pulses"],
            hhmm(r["watermark"]),
        )
        for r in table.to_pylist()
    )


def raw(segments) -> pa.Table:
    rows = [
        {"segment": s, "line_number": n, "raw_line": line, "line_bytes": None}
        for s, lines in enumerate(segments, start=1)
        for n, line in enumerate(lines, start=1)
    ]
    schema = pa.schema([("segment", pa.int64()), ("line_number", pa.int64()), ("raw_line", pa.string())])
    return pa.Table.from_pylist(rows, schema.append(pa.field("line_bytes", pa.int64())))


def walk(cuts: list[list[int]]) -> tuple[dict, list, dict]:
    """The step over the log, one micro-batch per group of segments in ``cuts``."""
    d = declaration()
    state, windows, late, counts = DeclaredState(), {}, [], {}
    parsed = parse_declared_lines(d, raw(SEGMENTS))
    for batch_id, segments in enumerate(cuts):
        lines = parsed.filter(pa.compute.is_in(parsed["segment"], pa.array(segments, pa.int64())))
        batch = declared_step(d, lines, state, batch_id)
        state = batch.state
        windows.update(window_rows(batch.windows))
        late += late_rows(batch.late)
        for k, v in batch.figures.items():
            if isinstance(v, int) and k not in ("first_segment", "last_segment"):
                counts[k] = counts.get(k, 0) + v
    return windows, sorted(late), counts


@pytest.mark.parametrize("cuts", [[[1], [2], [3], [4]], [[1, 2, 3, 4]], [[1, 2], [3, 4]], [[1], [2, 3, 4]]])
def test_the_step_is_the_same_whatever_the_cut(cuts):
    windows, late, counts = walk(cuts)
    assert windows == STREAM
    assert late == sorted(LATE)
    assert counts == {
        "input_lines": 20,
        "events": 15,
        "late_events": 2,
        "duplicates": 1,
        "dead_letters": 1,
        "heartbeats": 1,
    }


EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "meters"
PAGE = Path(__file__).resolve().parents[1] / "docs" / "bring-your-own-events.md"


def page_block(marker: str) -> list[str]:
    """The lines of the page's block between ``<!-- marker:start -->`` and its end, fences dropped."""
    text = PAGE.read_text()
    block = text.split(f"<!-- {marker}:start -->")[1].split(f"<!-- {marker}:end -->")[0]
    return [line for line in block.strip().splitlines() if not line.startswith("```")]


def test_the_example_ships_this_files_log_and_declaration():
    """``examples/meters`` holds the lines and the declaration these tests check."""
    shipped = [(EXAMPLE / f"readings-{n}.jsonl").read_text().splitlines() for n in range(1, 5)]
    assert shipped == SEGMENTS
    assert tomllib.loads((EXAMPLE / "meters.toml").read_text())["pipelines"] == tomllib.loads(DECLARATION)["pipelines"]


@pytest.fixture(scope="module")
def lab(spark, tmp_path_factory):
    """The commands of docs/bring-your-own-events.md run as written, in the tests' session, in a
    copy of ``examples/meters``: (lake, exit codes, what each printed, batch_truth's versions
    after each batch). A command run a second time is named ``<command> again``."""
    import contextlib
    import io
    import os
    import shlex
    import shutil

    home = tmp_path_factory.mktemp("meters") / "meters"
    shutil.copytree(EXAMPLE, home)
    lake = home / "meters-lake"
    codes, printed, versions = {}, {}, []
    saved = {k: os.environ.pop(k) for k in ("LKLAB_PIPELINE", "LKLAB_CONFIG", "LKLAB_LAKE") if k in os.environ}
    here = Path.cwd()
    os.chdir(home)
    try:
        for line in page_block("meters"):
            args = shlex.split(line, comments=True)
            assert args[0] == "lklab", line
            name = args[1] if args[1] not in codes else f"{args[1]} again"
            out = io.StringIO()
            with cli_in_this_process(), contextlib.redirect_stdout(out):
                codes[name] = main(args[1:])
            printed[name] = out.getvalue()
            if args[1] == "batch":
                versions.append(_versions(lake))
    finally:
        os.chdir(here)
        os.environ.update(saved)
    return lake, codes, printed, versions


def test_the_page_shows_what_its_commands_print(lab):
    _, _, printed, _ = lab
    shown = "".join(printed.values())
    missing = [line for line in page_block("meters-output") if line not in shown]
    assert not missing, missing


def _versions(lake) -> dict:
    from deltalake import DeltaTable

    return {t.name: DeltaTable(str(lake / "tables" / t.name)).version() for t in tables_of(declaration()).batch}


def read(spark, lake, name) -> pa.Table:
    return Tables(spark, lake, "deltalake").read_arrow(name)


def test_every_job_runs(lab):
    _, codes, printed, _ = lab
    assert codes == dict.fromkeys(codes, 0), printed
    assert (
        "20 lines = 15 events + 2 late events + 1 duplicates + 1 dead letters + 1 heartbeats (conserved)"
        in (printed["speed"])
    )
    assert "20 lines = 17 events + 1 duplicates + 1 dead letters + 1 heartbeats (conserved)" in printed["batch"]


def test_truth_stream_and_late_rows(spark, lab):
    lake = lab[0]
    t = tables_of(declaration())
    assert window_rows(read(spark, lake, t.truth.name)) == TRUTH
    assert window_rows(read(spark, lake, t.windows.name)) == STREAM
    assert late_rows(read(spark, lake, t.late.name)) == sorted(LATE)
    (duplicate,) = read(spark, lake, t.duplicates.name).to_pylist()
    assert (duplicate["event_id"], duplicate["first_segment"], duplicate["first_line_number"]) == ("r03", 1, 3)
    # the raw line as ``lklab ingest`` was given it, byte for byte
    sent = (lake.parent / "readings-2.jsonl").read_bytes().splitlines()
    assert not duplicate["payload_conflict"] and duplicate["raw_line"].encode() == sent[1]
    (dead,) = read(spark, lake, t.dead_letter.name).to_pylist()
    assert (dead["reject_reason"], dead["reject_detail"]) == ("invalid_measure", "kwh")
    assert dead["raw_line"].encode() == sent[2]
    batch_dead = read(spark, lake, t.batch_dead_letter.name).to_pylist()
    assert [(r["segment"], r["line_number"], r["raw_line"].encode()) for r in batch_dead] == [(2, 3, sent[2])]


def measures_conserved(spark, lake, d) -> int:
    """Every measure's total over the truth is the stream's plus the late rows', and every
    micro-batch's lines are each in one place; the truth's event count."""
    t = tables_of(d)
    truth, stream, late = (read(spark, lake, name).to_pylist() for name in (t.truth.name, t.windows.name, t.late.name))
    for measure in (m.name for m in d.measures):
        assert sum(r[measure] for r in truth) == sum(r[measure] for r in stream) + sum(r[measure] for r in late)
    events = sum(r["event_count"] for r in truth)
    assert events == sum(r["event_count"] for r in stream) + len(late)
    metrics = sorted(read(spark, lake, t.stream_metrics.name).to_pylist(), key=lambda m: m["batch_id"])
    assert [m["batch_id"] for m in metrics] == [0, 1, 2, 3]
    parts = ("events", "late_events", "duplicates", "dead_letters", "heartbeats")
    assert all(m["input_lines"] == sum(m[p] for p in parts) for m in metrics)
    return events


def replay_is_live(spark, lake, d) -> None:
    """The replay ``again``'s stream tables hold the live run's rows."""
    for table in tables_of(d).stream:
        live, replayed = read(spark, lake, table.name), read(spark, lake, table.at("kappa/again/"))
        columns = [c for c in live.schema.names if c not in TIMING_COLUMNS]  # how long a step took differs
        order = [(c, "ascending") for c in columns if c not in ("watermark_lag_seconds",)]
        assert replayed.select(columns).sort_by(order).equals(live.select(columns).sort_by(order)), table.name


def test_every_measure_is_conserved(spark, lab):
    assert measures_conserved(spark, lab[0], declaration()) == 17


def test_the_replay_is_the_live_run(spark, lab):
    replay_is_live(spark, lab[0], declaration())


def test_the_reconcile_explains_the_gap_by_the_late_events(lab):
    printed = lab[2]
    for name, against in (("reconcile", "speed"), ("reconcile again", "kappa:again")):
        assert printed[name].splitlines() == [
            f"meter_kwh: {against} (segments 1..4) against the truth (segments 1..4): windows match 5, "
            "value_mismatch 2, missing_in_stream 0, extra_in_stream 0",
            "totals: truth event_count 17, kwh 16.225, pulses 131; stream event_count 15, kwh 15.525, pulses 125; "
            "late event_count 2, kwh 0.700, pulses 6",
            "explained: 2 windows by their late events (truth = stream + late), 0 by segments the stream has not "
            "read yet",
            "unexplained: 0 windows",
        ]


def test_a_rerun_of_the_batch_changes_nothing(lab):
    first, again = lab[3]
    assert again == first  # every commit is tagged with the last segment read: the rerun commits nothing


def test_tables_prints_where_each_table_is(lab):
    lake, _, printed, _ = lab
    where = json.loads(printed["tables"])  # role -> path: the contract a script reads
    assert where["truth"] == str((lake / "tables" / "meter_kwh_truth").resolve())
    assert where["stream"] == str((lake / "tables" / "meter_kwh_windows").resolve())
    assert {"late", "duplicates", "dead_letters", "stream_metrics", "stream_state"} <= set(where)


def test_tables_against_a_replay_prints_where_its_stream_tables_are(lab, capsys):
    lake = lab[0]
    config = lake.parent / "meters.toml"
    argv = ["tables", "--pipeline", "meter_kwh", "--config", str(config), "--lake", str(lake), "--json"]
    with cli_in_this_process():
        assert main([*argv, "--against", "kappa:again"]) == 0
        where = json.loads(capsys.readouterr().out)
        assert main([*argv, "--against", "kappa"]) == 2
    root = (lake / "tables").resolve()
    assert where["stream"] == str(root / "kappa" / "again" / "meter_kwh_windows")
    assert where["late"] == str(root / "kappa" / "again" / "meter_kwh_late")
    assert where["truth"] == str(root / "meter_kwh_truth")  # the batch's tables are nobody's replay
    assert all(Path(path, "_delta_log").is_dir() for path in where.values()), where
    assert "--against 'kappa': use 'speed' or 'kappa:<RUN>'" in capsys.readouterr().err


def test_maintenance_compacts_the_declared_pipelines_stream_tables(lab):
    """``lklab maintain`` ran last: the declared stream's tables, each written once per
    micro-batch, are compacted to one file, as every registered pipeline's are."""
    lake, _, printed, _ = lab
    t = tables_of(declaration())
    lines = {line.split(":")[0].strip(): line for line in printed["maintain"].splitlines()}
    for table in (t.windows, t.late, t.duplicates, t.dead_letter, t.stream_metrics, t.stream_state):
        assert table.name in lines, printed["maintain"]
    assert "4 -> 1 files" in lines[t.stream_metrics.name], lines[t.stream_metrics.name]


def test_a_declared_name_taken_by_a_registered_pipeline_is_refused(tmp_path, capsys):
    config = tmp_path / "lklab.toml"
    config.write_text(DECLARATION.replace("meter_kwh", "running_max"))
    with cli_in_this_process():
        code = main(["batch", "--pipeline", "running_max", "--config", str(config), "--lake", str(tmp_path)])
    assert code == 2
    assert "[pipelines.running_max] declares a pipeline named like a registered one" in capsys.readouterr().err


def test_generate_is_refused_naming_ingest(tmp_path, capsys):
    config = tmp_path / "lklab.toml"
    config.write_text(DECLARATION)
    with cli_in_this_process():
        code = main(["generate", "--pipeline", "meter_kwh", "--config", str(config), "--lake", str(tmp_path)])
    assert code == 2
    assert "lklab ingest --pipeline meter_kwh FILE..." in capsys.readouterr().err


@pytest.mark.parametrize(
    "given, refused",
    [
        (["--watermark-delay", "5m"], "--watermark-delay does not apply to 'batch' on the meter_kwh pipeline"),
        ({"LKLAB_WATERMARK_DELAY": "5m"}, "LKLAB_WATERMARK_DELAY does not apply to 'batch' on the meter_kwh pipeline"),
        ({"LKLAB_WINDOW_SIZE": "1h"}, "LKLAB_WINDOW_SIZE does not apply to 'batch' on the meter_kwh pipeline"),
    ],
)
def test_a_setting_the_declaration_holds_is_refused_as_a_flag_and_as_a_variable(
    tmp_path, capsys, monkeypatch, given, refused
):
    """The windows and stream settings are the declaration's: a flag or an environment variable
    setting one is refused (exit 2) rather than left unread, saying where to change it."""
    config = tmp_path / "lklab.toml"
    config.write_text(DECLARATION)
    flags = given if isinstance(given, list) else []
    for name, value in ({} if isinstance(given, list) else given).items():
        monkeypatch.setenv(name, value)
    with cli_in_this_process():
        code = main(["batch", "--pipeline", "meter_kwh", "--config", str(config), "--lake", str(tmp_path), *flags])
    err = capsys.readouterr().err
    assert code == 2
    assert refused in err and "edit [pipelines.meter_kwh]" in err


# A log whose second micro-batch writes every table of the stream: a resend (a duplicate), a bad
# measure (a dead letter), a reading late for its window (watermark 10:08 - 2m = 10:06 >= 10:05)
# and one counted in its window, after five readings in the first.
CRASH_LOG = [
    [*SEGMENTS[0], reading("r09", "m1", "north", "08:00", "0.125", 1, "08:02")],
    [
        SEGMENTS[1][1],
        SEGMENTS[1][2],
        reading("r12", "m2", "south", "04:00", "0.300", 3, "09:05"),
        reading("r08", "m2", "south", "07:30", "1.500", 12, "09:06"),
    ],
]


def committed_rows(spark, lake) -> dict[str, list[dict]]:
    """Every table the declared stream commits, its metrics (durations aside) and state included,
    batch ids kept."""
    tables = Tables(spark, lake, "deltalake")
    found = {}
    for table in tables_of(declaration()).stream:
        rows = tables.read_arrow(table.name)
        rows = rows.drop_columns([name for name in TIMING_COLUMNS if name in rows.column_names])
        found[table.name] = sorted(rows.to_pylist(), key=lambda r: tuple((v is None, str(v)) for v in r.values()))
    return found


@pytest.mark.slow
def test_sigkill_at_named_points_then_a_restart_commits_the_rows_of_an_uninterrupted_run(spark, tmp_path):
    """``lklab speed --pipeline meter_kwh`` killed at crash points of micro-batch 1 in turn (the
    last and one drawn before it; the first, before the batch writes, is every pipeline's:
    ``tests/crash_runs.py``), each process going on from the one before, then a clean run: every
    table the stream commits equals an uninterrupted run's, batch ids and all."""
    from lklab.crash_points import batch_points
    from shared.eventlog import EventLog
    from tests.crash_runs import kill_at_each, sampled_points

    config = tmp_path / "lklab.toml"
    config.write_text(DECLARATION)
    clean, crashes = tmp_path / "clean", tmp_path / "crashes"
    for lake in (clean, crashes):
        for lines in CRASH_LOG:
            EventLog(lake).append(lines, stamp=False)
    speed = lambda lake: main(
        ["speed", "--pipeline", "meter_kwh", "--config", str(config), "--lake", str(lake), "--available-now"]
    )
    with cli_in_this_process():
        assert speed(clean) == 0
    expected = committed_rows(spark, clean)
    stream = tables_of(declaration()).stream
    # batch 1 writes every output: the rows of those that keep a batch id, r08's window in the windows
    written = {name: {row.get("batch_id") for row in rows} for name, rows in expected.items()}
    t = tables_of(declaration())
    assert all(1 in written[table.name] for table in stream[:-1] if table != t.windows), written
    assert ("m2", "10:05") in {(r["meter"], hhmm(r["window_start"])) for r in expected[t.windows.name]}
    points = batch_points(1, [table.name for table in stream])
    seed, sample = sampled_points(points, 1, first=False)
    kill_at_each(crashes, "meter_kwh", ["--config", str(config)], sample, seed)
    with cli_in_this_process():
        assert speed(crashes) == 0, seed
    assert committed_rows(spark, crashes) == expected, seed

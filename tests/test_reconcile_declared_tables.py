"""``lklab reconcile --truth-table --stream-table --pipeline NAME``: a declared pipeline's log
explains the gaps between two tables the lab did not write.

The pipeline ``meter_kwh`` (tumbling 5m windows, watermark delay 2m, keys meter and region with
region north or south, measure ``kwh`` decimal(18,3)) over a hand-made log of four segments,
times on 2026-01-05 (event time, then received):

    segment 1: e01 m1 north 10:00:30 1.250 | e02 m2 south 10:01 0.500 | e03 m1 north 10:02 2.000
    segment 2: e04 m1 north 10:06 0.250 | e03 again (a resend) | e05 m3 east 10:07 0.700 (a dead
               letter: east is not allowed) | e06 m2 south 10:08 1.000
    segment 3: e07 m2 south 10:04 0.300 received 10:09 (watermark 10:08 - 2m = 10:06 >= 10:05:
               late) | e12 m5 south 10:03 0.200 received 10:09:30 (late) | e08 m4 north 10:11 0.100
    segment 4: e09 m1 north 10:12 0.600 | e10 m4 north 10:13 0.400 | e13 m5 south 10:04:30 0.450
               received 10:13:30 (watermark 10:11: late)

The team's truth (a Delta table) counts every first copy; its stream (Parquet) read segments
1..3, counted the resend and the dead letter, judged e07 and e12 late, and has a kwh off by 0.001:

    window  meter region  truth         stream        why (delta = stream - truth)
    A 10:00 m1 north      2, 3.250      3, 5.250      duplicates: +1, +2.000 (e03's resend)
    B 10:00 m2 south      2, 0.800      1, 0.500      late_events: -1, -0.300 (e07)
    H 10:00 m5 south      2, 0.650      -             late_events + unread_segments: e12 + e13
    C 10:05 m3 east       -             1, 0.700      dead_letters: +1, +0.700 (e05)
    D 10:05 m1 north      1, 0.250      1, 0.250      match
    E 10:05 m2 south      1, 1.000      1, 1.001      unexplained: +0, +0.001
    F 10:10 m4 north      2, 0.500      1, 0.100      unread_segments: -1, -0.400 (e10)
    G 10:10 m1 north      1, 0.600      -             unread_segments: -1, -0.600 (e09)

The commands run in this process, in the tests' Spark session.
"""

from __future__ import annotations

import datetime as dt
import json
import os
from decimal import Decimal

import pandas as pd
import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from lklab.cli import main as lklab_main
from reconciliation.gap_reasons import EXTRA, MISSING, DifferingKey, GapReason, GapReasons, explain
from shared.eventlog import EventLog
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

[pipelines.meter_kwh.fields.region]
values = ["north", "south"]
"""


def reading(reading_id: str, meter: str, region: str, read_at: str, kwh: str, received_at: str) -> str:
    return json.dumps(
        {
            "reading_id": reading_id,
            "meter": meter,
            "region": region,
            "read_at": f"2026-01-05T10:{read_at}Z",
            "kwh": kwh,
            "received_at": f"2026-01-05T10:{received_at}Z",
        }
    )


SEGMENTS = [
    [
        reading("e01", "m1", "north", "00:30", "1.250", "00:31"),
        reading("e02", "m2", "south", "01:00", "0.500", "01:02"),
        reading("e03", "m1", "north", "02:00", "2.000", "02:01"),
    ],
    [
        reading("e04", "m1", "north", "06:00", "0.250", "06:01"),
        reading("e03", "m1", "north", "02:00", "2.000", "06:10"),
        reading("e05", "m3", "east", "07:00", "0.700", "07:01"),
        reading("e06", "m2", "south", "08:00", "1.000", "08:01"),
    ],
    [
        reading("e07", "m2", "south", "04:00", "0.300", "09:00"),
        reading("e12", "m5", "south", "03:00", "0.200", "09:30"),
        reading("e08", "m4", "north", "11:00", "0.100", "11:01"),
    ],
    [
        reading("e09", "m1", "north", "12:00", "0.600", "12:01"),
        reading("e10", "m4", "north", "13:00", "0.400", "13:01"),
        reading("e13", "m5", "south", "04:30", "0.450", "13:30"),
    ],
]
KEYS = "window_start,window_end,meter,region"
MEASURES = "event_count,kwh"
SCHEMA = pa.schema(
    {
        "window_start": pa.timestamp("us", tz="UTC"),
        "window_end": pa.timestamp("us", tz="UTC"),
        "meter": pa.string(),
        "region": pa.string(),
        "event_count": pa.int64(),
        "kwh": pa.decimal128(18, 3),
    }
)
TRUTH = [
    ("00", "m1", "north", 2, "3.250"),
    ("00", "m2", "south", 2, "0.800"),
    ("00", "m5", "south", 2, "0.650"),
    ("05", "m1", "north", 1, "0.250"),
    ("05", "m2", "south", 1, "1.000"),
    ("10", "m4", "north", 2, "0.500"),
    ("10", "m1", "north", 1, "0.600"),
]
STREAM = [
    ("00", "m1", "north", 3, "5.250"),
    ("00", "m2", "south", 1, "0.500"),
    ("05", "m3", "east", 1, "0.700"),
    ("05", "m1", "north", 1, "0.250"),
    ("05", "m2", "south", 1, "1.001"),
    ("10", "m4", "north", 1, "0.100"),
]


def rows(windows) -> list[dict]:
    start = dt.datetime(2026, 1, 5, 10, 0, tzinfo=dt.UTC)
    return [
        {
            "window_start": start + dt.timedelta(minutes=int(minute)),
            "window_end": start + dt.timedelta(minutes=int(minute) + 5),
            "meter": meter,
            "region": region,
            "event_count": count,
            "kwh": Decimal(kwh),
        }
        for minute, meter, region, count, kwh in windows
    ]


def window(minute: str, meter: str, region: str) -> dict:
    start = f"2026-01-05 10:{minute}:00"
    return {
        "window_start": start,
        "window_end": f"2026-01-05 10:{int(minute) + 5:02d}:00",
        "meter": meter,
        "region": region,
    }


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """The configuration file, a lake holding the log, the truth (Delta) and the stream (Parquet)."""
    root = tmp_path_factory.mktemp("declared-foreign")
    config = root / "lklab.toml"
    config.write_text(DECLARATION)
    log = EventLog(root / "lake")
    for number, lines in enumerate(SEGMENTS, start=1):
        segment = root / f"readings-{number}.jsonl"
        segment.write_text("\n".join(lines) + "\n")
        log.append_file(segment)
    write_deltalake(str(root / "truth"), pa.Table.from_pylist(rows(TRUTH), schema=SCHEMA))
    pd.DataFrame(rows(STREAM)).to_parquet(root / "stream.parquet", schema=SCHEMA, index=False)
    return root


@pytest.fixture
def reconcile(spark, monkeypatch, capsys, lab):
    """``lklab reconcile`` of the module's two tables with ``ARGS``, in this process:
    ``(exit code, stdout, stderr)``."""

    def call(*args: str, truth=None, stream=None, keys=KEYS, measures=MEASURES) -> tuple[int, str, str]:
        for name in [name for name in os.environ if name.startswith("LKLAB_")]:
            monkeypatch.delenv(name)
        monkeypatch.setenv("LKLAB_TABLE_ENGINE", "deltalake")
        capsys.readouterr()
        tables = [
            "--truth-table",
            str(truth or lab / "truth"),
            "--stream-table",
            str(stream or lab / "stream.parquet"),
            "--keys",
            keys,
            "--measures",
            measures,
        ]
        command = ["reconcile", "--lake", str(lab / "lake"), "--config", str(lab / "lklab.toml"), *tables, *args]
        with cli_in_this_process():
            code = lklab_main(command)
        out, err = capsys.readouterr()
        return code, out, err

    return call


def attribution(document: dict) -> dict:
    """Each listed key, as (minute, meter, region), to the reasons that explain it."""
    return {
        (v["key"]["window_start"][14:16], v["key"]["meter"], v["key"]["region"]): v["explained_by"]
        for v in document["explanation"]["keys"]
    }


def test_every_gap_is_explained_from_the_log_but_the_one_it_cannot_explain(reconcile):
    code, out, err = reconcile("--pipeline", "meter_kwh", "--stream-read-through", "3", "--json")
    document = json.loads(out)
    assert code == 3  # E's kwh +0.001 is unexplained, above the default 0
    assert document["statuses"] == {"match": 1, "value_mismatch": 4, "missing_in_stream": 2, "extra_in_stream": 1}
    assert document["pipeline"] == "meter_kwh"
    assert document["explained_by"] == {"late_events": 2, "duplicates": 1, "dead_letters": 1, "unread_segments": 3}
    assert attribution(document) == {
        ("00", "m1", "north"): ["duplicates"],
        ("00", "m2", "south"): ["late_events"],
        ("00", "m5", "south"): ["late_events", "unread_segments"],
        ("05", "m3", "east"): ["dead_letters"],
        ("05", "m2", "south"): [],
        ("10", "m4", "north"): ["unread_segments"],
        ("10", "m1", "north"): ["unread_segments"],
    }
    explanation = document["explanation"]
    assert (explanation["explained_keys"], explanation["combined_keys"], explanation["unexplained_keys"]) == (6, 1, 1)
    assert explanation["keys"][0] == {  # the unexplained first
        "key": window("05", "m2", "south"),
        "status": "value_mismatch",
        "delta": {"event_count": 0, "kwh": "0.001"},
        "explained_by": [],
    }
    assert explanation["source"] == {
        "pipeline": "meter_kwh",
        "log_segments": 4,
        "stream_read_through": 3,
        "window": "tumbling 5m",
        "watermark_delay": "2m",
        "allowed_lateness": "0s",
        "declaration": explanation["source"]["declaration"],
    }
    assert document["unexplained"] == {"keys": 1, "measures": {"event_count": 0, "kwh": "0.001"}}
    assert document["measures"]["kwh"]["delta_total"] == "0.751"  # 7.801 - 7.050: the diff is as without the log
    assert (
        err.splitlines()[-1]
        == "lklab reconcile: UNEXPLAINED GAP: kwh: unexplained sum |delta| 0.001 over 1 keys exceeds 0"
    )


def test_the_text_names_each_reason_with_its_count(reconcile):
    code, out, _ = reconcile("--pipeline", "meter_kwh", "--stream-read-through", "3", "--max-unexplained", "0.001")
    assert code == 0
    lines = out.splitlines()
    at = lines.index(
        "  explained by the meter_kwh pipeline's log (segments 1..4, watermark delay 2m; "
        "the stream read through segment 3):"
    )
    assert lines[at + 1] == (
        "    6 keys, 1 by a combination; keys per reason: late events 2, duplicates 1, dead letters 1, unread segments 3"
    )
    assert (
        "    window_start=2026-01-05 10:00:00 window_end=2026-01-05 10:05:00 meter=m5 region=south "
        "missing_in_stream: event_count -2, kwh -0.650 (late_events + unread_segments)"
    ) in lines
    assert lines[-3:-1] == [
        "  unexplained: 1 keys; sum |delta| event_count 0, kwh 0.001",
        "    window_start=2026-01-05 10:05:00 window_end=2026-01-05 10:10:00 meter=m2 region=south "
        "value_mismatch: event_count +0, kwh +0.001",
    ]


def test_without_the_read_through_the_whole_log_was_read(reconcile):
    """F and G are then unexplained (their events are in segment 4, which the stream would have
    read), and H's two events are both late: e13 too, on the whole log's clock."""
    code, out, _ = reconcile("--pipeline", "meter_kwh", "--json")
    document = json.loads(out)
    assert code == 3
    assert document["explained_by"] == {"late_events": 2, "duplicates": 1, "dead_letters": 1, "unread_segments": 0}
    assert attribution(document) == {
        ("00", "m1", "north"): ["duplicates"],
        ("00", "m2", "south"): ["late_events"],
        ("00", "m5", "south"): ["late_events"],
        ("05", "m3", "east"): ["dead_letters"],
        ("05", "m2", "south"): [],
        ("10", "m4", "north"): [],
        ("10", "m1", "north"): [],
    }
    assert document["unexplained"] == {"keys": 3, "measures": {"event_count": 2, "kwh": "1.001"}}
    assert document["explanation"]["source"]["stream_read_through"] is None


def test_without_a_pipeline_every_gap_is_unexplained(reconcile):
    code, out, _ = reconcile("--json")
    document = json.loads(out)
    assert code == 3
    assert document["explained_by"] is None and document["explanation"] is None
    assert document["unexplained"] == {"keys": 7, "measures": {"event_count": 7, "kwh": "4.651"}}


def test_the_truth_as_parquet_and_the_stream_as_delta_explain_alike(reconcile, lab, tmp_path):
    truth, stream = tmp_path / "truth.parquet", tmp_path / "stream"
    pd.DataFrame(rows(TRUTH)).to_parquet(truth, schema=SCHEMA, index=False)
    write_deltalake(str(stream), pa.Table.from_pylist(rows(STREAM), schema=SCHEMA))
    code, out, _ = reconcile(
        "--pipeline", "meter_kwh", "--stream-read-through", "3", "--json", truth=truth, stream=stream
    )
    document = json.loads(out)
    assert code == 3
    assert document["explained_by"] == {"late_events": 2, "duplicates": 1, "dead_letters": 1, "unread_segments": 3}
    assert document["unexplained"]["keys"] == 1


def test_the_run_row_counts_only_the_unexplained_keys(reconcile, lab):
    explained = json.loads(reconcile("--pipeline", "meter_kwh", "--stream-read-through", "3", "--json")[1])
    plain = json.loads(reconcile("--json")[1])
    assert explained["run_id"] != plain["run_id"]  # the log's explanation is part of the run
    runs = DeltaTable(str(lab / "lake" / "tables" / "table_recon_runs")).to_pyarrow_table().to_pylist()
    by_run = {r["run_id"]: r for r in runs}
    assert (by_run[explained["run_id"]]["unexplained_keys"], by_run[plain["run_id"]]["unexplained_keys"]) == (1, 7)
    assert by_run[explained["run_id"]]["value_mismatch"] == 4
    diffs = DeltaTable(str(lab / "lake" / "tables" / "table_recon_diffs")).to_pyarrow_table().to_pylist()
    assert len([d for d in diffs if d["run_id"] == explained["run_id"]]) == 7  # every differing key kept


@pytest.mark.parametrize(
    ("args", "columns", "message"),
    [
        (
            ("--pipeline", "meter_kwh"),
            {"keys": "window_start,window_end,meter,site"},
            "--keys: 'site' is not one of the meter_kwh pipeline's; valid: window_start, window_end, meter, region",
        ),
        (("--pipeline", "meter_kwh"), {"measures": "event_count"}, "--measures lacks 'kwh'"),
        (("--pipeline", "meter_kwh", "--stream-read-through", "9"), {}, "the log has segments 1..4; valid: 0..4"),
        (("--stream-read-through", "3"), {}, "--stream-read-through needs --pipeline NAME of a declared pipeline"),
        (
            ("--pipeline", "unique_visitors", "--stream-read-through", "3"),
            {},
            "--stream-read-through needs --pipeline NAME of a declared pipeline",
        ),
    ],
    ids=["unknown-key", "missing-measure", "past-the-log", "no-pipeline", "registered-pipeline"],
)
def test_columns_and_segments_that_do_not_fit_are_refused_with_exit_2(reconcile, args, columns, message):
    code, out, err = reconcile(*args, **columns)
    assert code == 2 and out == ""
    assert message in err


def test_a_float_measure_cannot_be_explained_exactly(reconcile, tmp_path):
    stream = tmp_path / "stream.parquet"
    floats = SCHEMA.set(5, pa.field("kwh", pa.float64()))
    frame = pd.DataFrame(rows(STREAM)).assign(kwh=lambda f: f["kwh"].astype("float64"))
    frame.to_parquet(stream, schema=floats, index=False)
    truth = tmp_path / "truth.parquet"
    pd.DataFrame(rows(TRUTH)).assign(kwh=lambda f: f["kwh"].astype("float64")).to_parquet(
        truth, schema=floats, index=False
    )
    code, _, err = reconcile("--pipeline", "meter_kwh", truth=truth, stream=stream)
    assert code == 2 and "measure 'kwh' is double in the truth table: a float cannot equal" in err


def test_a_window_bound_that_is_not_an_instant_is_refused(reconcile, tmp_path):
    text = SCHEMA.set(0, pa.field("window_start", pa.string()))
    paths = []
    for name, windows in (("truth", TRUTH), ("stream", STREAM)):
        frame = pd.DataFrame(rows(windows)).assign(window_start=lambda f: f["window_start"].astype(str))
        frame.to_parquet(tmp_path / f"{name}.parquet", schema=text, index=False)
        paths.append(tmp_path / f"{name}.parquet")
    code, _, err = reconcile("--pipeline", "meter_kwh", truth=paths[0], stream=paths[1])
    assert code == 2 and "key 'window_start' is not a timestamp but string: it names no instant" in err


def test_a_registered_pipeline_is_named_and_explains_nothing(reconcile):
    code, out, _ = reconcile("--pipeline", "unique_visitors", "--max-unexplained", "10")
    assert code == 0
    assert "  the unique_visitors pipeline is not declared: only a declared pipeline's log explains" in out


# The matching rule alone, without Spark: exact sums, the smallest set, ambiguity.


def reasons(**amounts) -> GapReasons:
    direction = {"late": MISSING, "unread": MISSING, "copies": EXTRA}
    return GapReasons(
        "a test",
        {},
        ("k",),
        tuple(GapReason(name, direction[name], name, found) for name, found in amounts.items()),
    )


def differing(k: str, count: int, kwh: str) -> DifferingKey:
    return DifferingKey((k,), {"k": k}, "value_mismatch", {"event_count": count, "kwh": Decimal(kwh)})


def test_a_key_is_explained_by_the_one_smallest_set_that_adds_up_exactly():
    found = reasons(
        late={("a",): {"event_count": 1, "kwh": Decimal("0.3")}, ("b",): {"event_count": 1, "kwh": Decimal("0.3")}},
        unread={("b",): {"event_count": 1, "kwh": Decimal("0.3")}, ("c",): {"event_count": 2, "kwh": Decimal("1")}},
        copies={("c",): {"event_count": 1, "kwh": Decimal("0.5")}},
    )
    judged = explain(
        [
            differing("a", -1, "-0.300"),  # late alone: 0.3 equals 0.300
            differing("b", -1, "-0.3"),  # late or unread: ambiguous
            differing("c", -1, "-0.5"),  # unread 2, 1 less copies 1, 0.5
            differing("d", -1, "-0.1"),  # no reason holds d
            differing("a", -1, "-0.301"),  # off by 0.001: nothing adds up
        ],
        found,
        ("event_count", "kwh"),
    )
    verdicts = {(v.key["k"], str(v.delta["kwh"])): (v.reasons, v.candidates) for v in judged.keys}
    assert verdicts == {
        ("a", "-0.300"): (("late",), ()),
        ("b", "-0.3"): ((), (("late",), ("unread",))),
        ("c", "-0.5"): (("unread", "copies"), ()),
        ("d", "-0.1"): ((), ()),
        ("a", "-0.301"): ((), ()),
    }
    assert judged.explained_by == {"late": 1, "unread": 1, "copies": 1}
    assert (judged.explained_keys, judged.combined_keys, judged.unexplained_keys) == (2, 1, 3)
    assert judged.unexplained_abs_delta == {"event_count": 3, "kwh": Decimal("0.701")}


def test_the_log_gives_each_reason_its_exact_amounts_per_window():
    """The amounts the matching above is given, from the log alone (no Spark): a dead letter is
    placed only when its id, keys, measures and event time can still be read (e05: a region not
    allowed); e14 (kwh not a number) and e15 (more decimals than decimal(18,3) holds) cannot be."""
    import tomllib

    from lklab.pipelines.declared.declaration import declarations
    from lklab.pipelines.declared.foreign_gaps import gap_reasons

    unplaceable = [
        reading("e14", "m1", "north", "06:30", "abc", "11:30"),
        reading("e15", "m1", "north", "06:40", "1.2345", "11:40"),
    ]
    lines = [
        {"segment": s, "line_number": n, "raw_line": line, "line_bytes": None}
        for s, segment in enumerate([*SEGMENTS[:2], SEGMENTS[2] + unplaceable, SEGMENTS[3]], start=1)
        for n, line in enumerate(segment, start=1)
    ]
    raw = pa.Table.from_pylist(
        lines,
        pa.schema(
            {"segment": pa.int64(), "line_number": pa.int64(), "raw_line": pa.string(), "line_bytes": pa.int64()}
        ),
    )
    found = gap_reasons(declarations(tomllib.loads(DECLARATION))["meter_kwh"], raw, 4, 3)

    def at(minute: int, meter: str, region: str) -> tuple:
        start = int(dt.datetime(2026, 1, 5, 10, minute, tzinfo=dt.UTC).timestamp()) * 1_000_000
        return (start, start + 300_000_000, meter, region)

    amounts = {r.name: {k: (v["event_count"], v["kwh"]) for k, v in r.amounts.items()} for r in found.reasons}
    assert amounts == {
        "late_events": {at(0, "m2", "south"): (1, Decimal("0.300")), at(0, "m5", "south"): (1, Decimal("0.200"))},
        "duplicates": {at(0, "m1", "north"): (1, Decimal("2.000"))},
        "dead_letters": {at(5, "m3", "east"): (1, Decimal("0.700"))},
        "unread_segments": {
            at(10, "m1", "north"): (1, Decimal("0.600")),
            at(10, "m4", "north"): (1, Decimal("0.400")),
            at(0, "m5", "south"): (1, Decimal("0.450")),
        },
    }
    assert found.key_columns == ("window_start", "window_end", "meter", "region")

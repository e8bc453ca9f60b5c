"""``lklab reconcile --truth-table --stream-table``: the lab's diff of two tables it did not write.

One hand-made pair on every test: the truth a Delta table written by delta-rs, the stream
Parquet written by pandas, six keys (window_start, window_end, meter, region) and two measures
(``event_count`` bigint, ``kwh`` decimal(18,3)):

    meter  truth        stream        status             why
    m1     10, 1.500    10, 1.500     match
    m2     20, 2.250    20, 2.250     match
    m3      5, null      5, null      match              a null equals a null
    m4      7, 0.700     7, 0.701     value_mismatch     kwh off by 0.001
    m5      3, 0.300     -            missing_in_stream
    m6      -            4, 0.400     extra_in_stream

Deltas are stream - truth with an absent side as zero: event_count +0, -3, +4 (sum +1, sum of
|delta| 7, largest 4 at m6); kwh +0.001, -0.300, +0.400 (sum 0.101, |delta| 0.701, largest 0.400).
The commands run in this process, in the tests' Spark session.
"""

import datetime as dt
import json
import os
from decimal import Decimal

import pandas as pd
import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from lklab.cli import main as lklab_main
from tests.conftest import cli_in_this_process

KEYS = "window_start,window_end,meter,region"
MEASURES = "event_count,kwh"
START = dt.datetime(2026, 1, 5, 10, 0, tzinfo=dt.UTC)
END = START + dt.timedelta(minutes=5)
SCHEMA = pa.schema(
    {
        "window_start": pa.timestamp("us", tz="UTC"),
        "window_end": pa.timestamp("us", tz="UTC"),
        "meter": pa.string(),
        "region": pa.string(),
        "event_count": pa.int64(),
        "kwh": pa.decimal128(18, 3),
        "note": pa.string(),  # neither key nor measure: not read
    }
)
TRUTH = [("m1", 10, "1.500"), ("m2", 20, "2.250"), ("m3", 5, None), ("m4", 7, "0.700"), ("m5", 3, "0.300")]
STREAM = [("m1", 10, "1.500"), ("m2", 20, "2.250"), ("m3", 5, None), ("m4", 7, "0.701"), ("m6", 4, "0.400")]


def rows(readings, **overrides) -> list[dict]:
    return [
        {
            "window_start": START,
            "window_end": END,
            "meter": meter,
            "region": "north" if meter in ("m1", "m2", "m4") else "south",
            "event_count": count,
            "kwh": None if kwh is None else Decimal(kwh),
            "note": "x",
            **overrides,
        }
        for meter, count, kwh in readings
    ]


def delta_table(path, readings, schema=SCHEMA) -> str:
    write_deltalake(str(path), pa.Table.from_pylist(rows(readings), schema=schema))
    return str(path)


def parquet_file(path, readings, schema=SCHEMA, **overrides) -> str:
    pd.DataFrame(rows(readings, **overrides)).to_parquet(path, schema=schema, index=False)
    return str(path)


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    root = tmp_path_factory.mktemp("foreign")
    return delta_table(root / "truth", TRUTH), parquet_file(root / "stream.parquet", STREAM)


@pytest.fixture(scope="module")
def shared_lake(tmp_path_factory):
    """One lake for the runs on the same inputs: after the first, they commit nothing (faster)."""
    return tmp_path_factory.mktemp("shared") / "lake"


@pytest.fixture
def lklab_here(spark, monkeypatch, capsys, shared_lake):
    """``lklab reconcile ARGS`` in this process on ``lake`` (default: the module's shared lake):
    ``(exit code, stdout, stderr)``."""

    def call(*args: str, lake=None) -> tuple[int, str, str]:
        for name in [name for name in os.environ if name.startswith("LKLAB_")]:
            monkeypatch.delenv(name)
        monkeypatch.setenv("LKLAB_TABLE_ENGINE", "deltalake")
        capsys.readouterr()
        with cli_in_this_process():
            code = lklab_main(["reconcile", "--lake", str(lake or shared_lake), *args])
        out, err = capsys.readouterr()
        return code, out, err

    return call


def tables(truth, stream, *args):
    return ("--truth-table", truth, "--stream-table", stream, "--keys", KEYS, "--measures", MEASURES, *args)


def test_delta_against_parquet_gives_every_status_and_exact_decimal_deltas(inputs, lklab_here, tmp_path):
    code, out, err = lklab_here(*tables(*inputs, "--json", "--json-out", str(tmp_path / "recon.json")))
    assert code == 3  # the default --max-unexplained 0: any key that differs breaches
    document = json.loads(out)
    assert document == json.loads((tmp_path / "recon.json").read_text())
    assert document["statuses"] == {"match": 3, "value_mismatch": 1, "missing_in_stream": 1, "extra_in_stream": 1}
    assert document["rows"] == {"truth": 5, "stream": 5}
    assert document["keys"] == KEYS.split(",")
    assert document["measures"]["event_count"] == {
        "truth_total": 45,
        "stream_total": 46,
        "delta_total": 1,
        "abs_delta_total": 7,
        "max_abs_delta": 4,
        "max_abs_delta_key": {
            "window_start": "2026-01-05 10:00:00",
            "window_end": "2026-01-05 10:05:00",
            "meter": "m6",
            "region": "south",
        },
    }
    kwh = document["measures"]["kwh"]
    assert (kwh["truth_total"], kwh["stream_total"], kwh["delta_total"]) == ("4.750", "4.851", "0.101")
    assert (kwh["abs_delta_total"], kwh["max_abs_delta"], kwh["max_abs_delta_key"]["meter"]) == ("0.701", "0.400", "m6")
    assert document["unexplained"] == {"keys": 3, "measures": {"event_count": 7, "kwh": "0.701"}}
    assert document["explained_by"] is None and document["pipeline"] is None
    assert document["truth_table"].endswith("truth") and document["inputs"]["truth"]["delta_version"] == 0
    gaps = {gap["key"]["meter"]: gap for gap in document["largest_gaps"]}
    assert [gap["key"]["meter"] for gap in document["largest_gaps"]] == [
        "m6",
        "m5",
        "m4",
    ]  # by |delta event_count|, then |delta kwh|
    assert gaps["m4"] == {
        "key": gaps["m4"]["key"],
        "status": "value_mismatch",
        "measures": {
            "event_count": {"truth": 7, "stream": 7, "delta": 0},
            "kwh": {"truth": "0.700", "stream": "0.701", "delta": "0.001"},
        },
    }
    assert "lklab reconcile: UNEXPLAINED GAP: event_count: unexplained sum |delta| 7 over 3 keys exceeds 0" in err


def test_the_text_names_statuses_deltas_and_the_largest_gaps(inputs, lklab_here):
    code, out, _ = lklab_here(*tables(*inputs, "--max-unexplained", "10"))
    assert code == 0
    lines = out.splitlines()
    assert lines[3].endswith("6 keys (3 match, 1 value_mismatch, 1 missing_in_stream, 1 extra_in_stream)")
    assert (
        "    kwh: truth 4.750 vs stream 4.851; sum of deltas +0.101, sum |delta| 0.701, largest |delta| 0.400 "
        "at window_start=2026-01-05 10:00:00 window_end=2026-01-05 10:05:00 meter=m6 region=south"
    ) in lines
    assert "  unexplained: 3 keys; sum |delta| event_count 7, kwh 0.701" in lines
    assert any(line.endswith("meter=m4 region=north value_mismatch: event_count +0, kwh +0.001") for line in lines)


def test_a_tolerance_turns_the_mismatch_into_a_match(inputs, lklab_here):
    code, out, _ = lklab_here(*tables(*inputs, "--abs-tol", "0.001", "--json", "--max-unexplained", "10"))
    document = json.loads(out)
    assert code == 0
    assert document["statuses"] == {"match": 4, "value_mismatch": 0, "missing_in_stream": 1, "extra_in_stream": 1}
    assert document["tolerance"]["rule"] == "|stream - truth| <= 0.001 + 0 * |truth|"
    assert document["unexplained"]["measures"]["kwh"] == "0.700"  # the mismatch within tolerance is explained away
    assert document["measures"]["kwh"]["delta_total"] == "0.101"  # the totals still count it
    _, below, _ = lklab_here(*tables(*inputs, "--abs-tol", "0.0009", "--json", "--max-unexplained", "10"))
    assert json.loads(below)["statuses"]["value_mismatch"] == 1


def test_exit_3_only_when_the_unexplained_gap_exceeds_the_threshold(inputs, lklab_here):
    code, _, err = lklab_here(*tables(*inputs, "--max-unexplained", "6.99"))
    assert code == 3
    assert (
        err.count("UNEXPLAINED GAP") == 1 and "event_count: unexplained sum |delta| 7 over 3 keys exceeds 6.99" in err
    )
    assert lklab_here(*tables(*inputs, "--max-unexplained", "7"))[0] == 0


def test_a_rerun_on_the_same_inputs_commits_nothing(inputs, lklab_here, tmp_path):
    lake = tmp_path / "lake"
    first = lklab_here(*tables(*inputs, "--json"), lake=lake)
    diffs, runs = lake / "tables" / "table_recon_diffs", lake / "tables" / "table_recon_runs"
    versions = DeltaTable(str(diffs)).version(), DeltaTable(str(runs)).version()
    written = DeltaTable(str(diffs)).to_pyarrow_table().to_pylist()
    assert sorted((json.loads(r["key"])["meter"], r["status"]) for r in written) == [
        ("m4", "value_mismatch"),
        ("m5", "missing_in_stream"),
        ("m6", "extra_in_stream"),
    ]
    m4 = next(r for r in written if r["status"] == "value_mismatch")
    assert json.loads(m4["delta"]) == {"event_count": "0", "kwh": "0.001"}
    m5 = next(r for r in written if r["status"] == "missing_in_stream")
    assert json.loads(m5["stream"]) == {"event_count": None, "kwh": None}
    run = DeltaTable(str(runs)).to_pyarrow_table().to_pylist()
    assert len(run) == 1 and run[0]["value_mismatch"] == 1 and run[0]["unexplained_keys"] == 3

    second = lklab_here(*tables(*inputs, "--json"), lake=lake)
    assert (DeltaTable(str(diffs)).version(), DeltaTable(str(runs)).version()) == versions
    assert json.loads(second[1]) == json.loads(first[1])
    assert "already in the lake: nothing written" in second[2]


def test_a_changed_input_is_a_new_run(tmp_path, lklab_here):
    truth = delta_table(tmp_path / "truth", TRUTH)
    stream = parquet_file(tmp_path / "stream.parquet", STREAM)
    first = json.loads(lklab_here(*tables(truth, stream, "--json"), lake=tmp_path / "lake")[1])
    write_deltalake(truth, pa.Table.from_pylist(rows([("m6", 4, "0.400")]), schema=SCHEMA), mode="append")
    second = json.loads(lklab_here(*tables(truth, stream, "--json"), lake=tmp_path / "lake")[1])
    assert second["run_id"] != first["run_id"] and second["inputs"]["truth"]["delta_version"] == 1
    assert second["statuses"]["extra_in_stream"] == 0
    assert len(DeltaTable(str(tmp_path / "lake" / "tables" / "table_recon_runs")).to_pyarrow_table()) == 2


def test_a_folder_of_parquet_files_is_one_table(tmp_path, inputs, lklab_here):
    folder = tmp_path / "stream"
    folder.mkdir()
    parquet_file(folder / "part-0.parquet", STREAM[:3])
    parquet_file(folder / "part-1.parquet", STREAM[3:])
    document = json.loads(lklab_here(*tables(inputs[0], str(folder), "--json"))[1])
    assert document["statuses"] == {"match": 3, "value_mismatch": 1, "missing_in_stream": 1, "extra_in_stream": 1}
    assert [name for name, *_ in document["inputs"]["stream"]["parquet_files"]] == ["part-0.parquet", "part-1.parquet"]


@pytest.mark.parametrize(
    ("make_stream", "message"),
    [
        (
            lambda path: parquet_file(path, STREAM, schema=SCHEMA.remove(SCHEMA.get_field_index("kwh"))),
            "has no column 'kwh'",
        ),
        (
            lambda path: parquet_file(path, STREAM, schema=SCHEMA.set(5, pa.field("kwh", pa.string())), kwh="1.5"),
            "measure 'kwh' is string, not a number in the stream table",
        ),
        (
            lambda path: parquet_file(path, STREAM, schema=SCHEMA.set(5, pa.field("kwh", pa.float64())), kwh=1.5),
            "measure 'kwh' is decimal(18,3) in the truth table",
        ),
        (
            lambda path: parquet_file(path, STREAM, schema=SCHEMA.set(2, pa.field("meter", pa.int64())), meter=1),
            "key 'meter' is string in the truth but bigint in the stream: they do not join",
        ),
        (
            lambda path: parquet_file(path, STREAM + [("m1", 11, "1.600")]),
            "the stream table",
        ),
    ],
    ids=["missing-column", "string-measure", "decimal-vs-float", "key-types", "duplicate-key"],
)
def test_tables_that_cannot_be_compared_are_refused_with_exit_2(inputs, lklab_here, tmp_path, make_stream, message):
    stream = make_stream(tmp_path / "stream.parquet")
    code, out, err = lklab_here(*tables(inputs[0], stream), lake=tmp_path / "lake")
    assert code == 2 and out == ""
    assert message in err and stream in err
    assert not (tmp_path / "lake" / "tables").exists()


def test_a_duplicated_key_is_named_never_summed(inputs, lklab_here, tmp_path):
    stream = parquet_file(tmp_path / "stream.parquet", STREAM + [("m1", 11, "1.600")])
    _, _, err = lklab_here(*tables(inputs[0], stream))
    assert "holds key" in err and "'meter': 'm1'" in err and "2 times" in err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--truth-table", "t"), "--truth-table needs --stream-table"),
        (("--stream-table", "s", "--keys", "a", "--measures", "b"), "--stream-table needs --truth-table"),
        (("--keys", "a", "--measures", "b"), "give --truth-table and --stream-table"),
        (("--truth-table", "t", "--stream-table", "s", "--measures", "b"), "--keys is required"),
        (("--truth-table", "t", "--stream-table", "s", "--keys", "a"), "--measures is required"),
        (tables("t", "s", "--against", "kappa:x"), "--against does not apply with --truth-table/--stream-table"),
        (tables("t", "s", "--date", "2026-01-05"), "--date does not apply"),
        (tables("t", "s", "--from", "2026-01-05"), "--from does not apply"),
        (tables("t", "s", "--window-size", "5m"), "--window-size does not apply"),
        (tables("t", "s", "--abs-tol", "x"), "abs-tol: 'x' is not a number"),
        (tables("t", "s"), "no table at t"),
    ],
)
def test_usage_errors_exit_2(lklab_here, tmp_path, args, message):
    code, _, err = lklab_here(*args)
    assert code == 2 and message in err


def test_a_registered_pipeline_is_named_but_explains_nothing(inputs, lklab_here):
    """Only a declared pipeline's log explains (tests/test_reconcile_declared_tables.py)."""
    code, out, _ = lklab_here(*tables(*inputs, "--pipeline", "unique_visitors", "--max-unexplained", "10"))
    assert code == 0
    assert "the unique_visitors pipeline is not declared: only a declared pipeline's log explains the gaps" in out
    document = json.loads(lklab_here(*tables(*inputs, "--pipeline", "unique_visitors", "--json"))[1])
    assert document["pipeline"] == "unique_visitors" and document["explained_by"] is None
    assert document["explanation"] is None and document["unexplained"]["keys"] == 3


def test_the_statuses_agree_with_datacompy(inputs, lklab_here):
    """datacompy's pandas comparison of the same two tables counts the same keys."""
    import datacompy

    ours = json.loads(lklab_here(*tables(*inputs, "--json"))[1])["statuses"]

    truth = DeltaTable(inputs[0]).to_pandas().drop(columns="note")
    stream = pd.read_parquet(inputs[1]).drop(columns="note")
    for frame in (truth, stream):  # one resolution for the join; Decimal objects compared as they are
        for column in ("window_start", "window_end"):
            frame[column] = frame[column].astype("datetime64[us, UTC]")
    compare = datacompy.PandasCompare(truth, stream, join_columns=KEYS.split(","))
    matched = compare.count_matching_rows()
    theirs = {
        "match": matched,
        "value_mismatch": len(compare.intersect_rows) - matched,
        "missing_in_stream": len(compare.df1_unq_rows),
        "extra_in_stream": len(compare.df2_unq_rows),
    }
    assert theirs == ours == {"match": 3, "value_mismatch": 1, "missing_in_stream": 1, "extra_in_stream": 1}
    assert compare.intersect_rows["kwh_match"].sum() == 3  # m3: null on both sides is equal there too

    # With a tolerance: datacompy compares Decimal objects exactly, so it gets kwh as floats
    # (0.701 - 0.700 is 0.0010000000000000009 there: a tolerance of 0.0015 keeps clear of it).
    within = json.loads(lklab_here(*tables(*inputs, "--json", "--abs-tol", "0.0015"))[1])["statuses"]
    for frame in (truth, stream):
        frame["kwh"] = frame["kwh"].astype("float64")
    tolerant = datacompy.PandasCompare(truth, stream, join_columns=KEYS.split(","), abs_tol=0.0015)
    assert tolerant.count_matching_rows() == within["match"] == 4
    assert len(tolerant.intersect_rows) - 4 == within["value_mismatch"] == 0

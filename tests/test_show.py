"""``lklab tables`` and ``lklab show`` on lakes the real commands wrote, and ``lklab health`` on
the same lake: a new user's first hour.

One billing lake, written once for the module as a user writes it (``lklab generate``, then
``lklab speed --available-now`` over the whole log, in the tests' Spark session), and one lake of
a declared pipeline (``lklab ingest`` of one file, ``lklab speed``). The expected rows are read
from the Delta tables with delta-rs directly, never through the code under test.
"""

from __future__ import annotations

import csv
import io
import json

import pytest
from deltalake import DeltaTable

from lklab.cli import main
from tests.conftest import cli_in_this_process


@pytest.fixture(scope="module")
def lake(spark, tmp_path_factory):
    lake = tmp_path_factory.mktemp("first-hour") / "lake"
    where = ["--lake", str(lake), "--table-engine", "deltalake"]
    generated = ["--events", "300", "--span", "20m", "--segment-interval", "10m", "--malformed-rate", "0.03"]
    with cli_in_this_process():
        assert main(["generate", *generated, *where]) == 0
        assert main(["speed", "--available-now", "--segments-per-batch", "50", *where]) == 0
    return lake


def lklab(capsys, *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    with cli_in_this_process():
        code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def delta_rows(lake, name: str) -> list[dict]:
    return DeltaTable(str(lake / "tables" / name)).to_pyarrow_dataset().to_table().to_pylist()


def in_log_order(rows: list[dict]) -> list[dict]:
    return sorted(rows, key=lambda row: (row["batch_id"], row["segment"], row["line_number"]))


# --- lklab tables ---------------------------------------------------------------------------


def test_tables_lists_each_tables_rows_and_version_and_says_which_are_not_written(lake, capsys):
    code, out, _ = lklab(capsys, "tables", "--lake", str(lake))
    assert code == 0
    lines = {line.split()[0]: line for line in out.splitlines()}
    dead = DeltaTable(str(lake / "tables" / "dead_letter"))
    count = dead.to_pyarrow_dataset().count_rows()
    assert count > 0, "the generator wrote malformed lines: some must be dead letters"
    assert f"{count:,} rows, version {dead.version()}" in lines["dead_letter"]
    assert lines["dead_letter"].endswith(str((lake / "tables" / "dead_letter").resolve()))
    assert "not written yet" in lines["batch_truth"]  # `lklab batch` has not run

    code, out, _ = lklab(capsys, "tables", "--lake", str(lake), "--json")
    assert json.loads(out)["dead_letter"] == str((lake / "tables" / "dead_letter").resolve())
    code, out, _ = lklab(capsys, "tables", "--lake", str(lake), "--json", "--sizes")
    listing = json.loads(out)
    assert listing["dead_letter"] == {
        "path": str((lake / "tables" / "dead_letter").resolve()),
        "written": True,
        "rows": count,
        "version": dead.version(),
    }
    assert listing["batch_truth"]["written"] is False
    assert (listing["batch_truth"]["rows"], listing["batch_truth"]["version"]) == (None, None)


# --- lklab show -----------------------------------------------------------------------------


def test_show_prints_the_dead_letters_as_an_aligned_table_with_the_count(lake, capsys):
    expected = in_log_order(delta_rows(lake, "dead_letter"))
    code, out, _ = lklab(capsys, "show", "dead_letter", "--lake", str(lake), "--limit", "3")
    assert code == 0
    header, rule, *rows, count = out.splitlines()
    assert header.split() == ["segment", "line_number", "raw_line", "reject_reason", "reject_detail", "batch_id"]
    assert set(rule) == {"-", " "}
    assert len(rows) == 3
    version = DeltaTable(str(lake / "tables" / "dead_letter")).version()
    assert count == f"3 of {len(expected)} rows of dead_letter (version {version}; --limit shows more)"
    reasons_at = header.index("reject_reason")
    for line, row in zip(rows, expected):
        assert line.split()[:2] == [str(row["segment"]), str(row["line_number"])]
        assert line[reasons_at:].startswith(row["reject_reason"])
    cut = [row for row in expected[:3] if len(row["raw_line"]) > 48]
    assert all(f"{row['raw_line'][:47]}…" in out for row in cut)


def test_show_where_filters_and_json_and_csv_give_whole_values(lake, capsys):
    expected = in_log_order(delta_rows(lake, "dead_letter"))
    reason = expected[0]["reject_reason"]
    matching = [row for row in expected if row["reject_reason"] == reason]
    where = f"reject_reason = '{reason}'"
    code, out, _ = lklab(capsys, "show", "dead_letter", "--lake", str(lake), "--where", where, "--json")
    assert code == 0
    shown = json.loads(out)
    assert (shown["table"], shown["where"], shown["matched"]) == ("dead_letter", where, len(matching))
    assert shown["rows"] == matching[:20]

    code, out, err = lklab(
        capsys, "show", "dead_letter", "--lake", str(lake), "--where", where, "--csv", "--limit", "0"
    )
    assert code == 0
    parsed = list(csv.DictReader(io.StringIO(out)))
    assert [(int(r["segment"]), int(r["line_number"]), r["raw_line"]) for r in parsed] == [
        (r["segment"], r["line_number"], r["raw_line"]) for r in matching
    ]
    assert f"{len(matching)} rows of dead_letter where {where}" in err


def test_show_refuses_an_unknown_table_naming_the_valid_ones(lake, capsys):
    code, _, err = lklab(capsys, "show", "dead_letters", "--lake", str(lake))
    assert code == 2
    assert "no table 'dead_letters' in the billing_windows pipeline: use one of dead_letter, duplicate_events" in err
    assert "batch_truth" in err


def test_show_refuses_a_predicate_the_table_cannot_evaluate_and_a_table_not_written(lake, capsys):
    code, _, err = lklab(capsys, "show", "dead_letter", "--lake", str(lake), "--where", "reason = 'x'")
    assert code == 2 and "--where \"reason = 'x'\"" in err and "reject_reason" in err, err
    code, _, err = lklab(capsys, "show", "batch_truth", "--lake", str(lake))
    assert code == 2 and "batch_truth: no Delta table at" in err and "not been written yet" in err, err


# --- lklab health on the same lake ----------------------------------------------------------


def test_health_after_the_speed_layer_read_the_whole_log_is_idle_not_lagging(lake, capsys):
    newest = max(delta_rows(lake, "stream_metrics"), key=lambda row: row["batch_id"])
    # The late arrivals at the end of the log leave the watermark far behind their arrival.
    assert newest["watermark_lag_seconds"] > 15 * 60
    code, out, _ = lklab(capsys, "health", "--lake", str(lake))
    assert code == 0, out
    assert out.startswith("speed layer healthy, idle (")
    assert "idle: read the whole log; last micro-batch " in out and "the log's last append " in out
    assert "the watermark lag over its limit is no alarm while idle" in out


def test_health_on_a_lake_that_is_not_there_is_a_usage_error(tmp_path, capsys):
    typo = tmp_path / "typo"
    code, out, err = lklab(capsys, "health", "--lake", str(typo))
    assert (code, out) == (2, "")
    assert f"lake {typo}: no such directory" in err
    typo.mkdir()
    code, _, err = lklab(capsys, "health", "--lake", str(typo))
    assert code == 2 and f"lake {typo}: holds no lake (neither log/ nor tables/ under it)" in err


# --- a declared pipeline: its tables by role ----------------------------------------------------

DECLARATION = """
[pipelines.meter_kwh]
kind = "windowed"
event-id = "reading_id"
event-time = "read_at"
keys = ["meter"]
window-size = "5m"
watermark-delay = "1m"

[pipelines.meter_kwh.measures]
kwh = "decimal(18,3)"
"""
READINGS = [
    '{"reading_id": "r1", "meter": "m1", "read_at": "2026-01-05T10:00:30Z", "kwh": "1.250"}',
    '{"reading_id": "r2", "meter": "m1", "read_at": "2026-01-05T10:01:00Z", "kwh": "abc"}',
    "not json at all",
]


def test_show_reads_a_declared_pipelines_dead_letters_by_role(spark, tmp_path, capsys):
    config, readings, lake = tmp_path / "meters.toml", tmp_path / "readings.jsonl", tmp_path / "lake"
    config.write_text(DECLARATION)
    readings.write_text("\n".join(READINGS) + "\n")
    chosen = ["--pipeline", "meter_kwh", "--config", str(config), "--lake", str(lake)]
    with cli_in_this_process():
        assert main(["ingest", str(readings), *chosen]) == 0
        assert main(["speed", "--available-now", "--table-engine", "deltalake", *chosen]) == 0
    code, out, _ = lklab(capsys, "show", "dead_letters", *chosen, "--json")
    assert code == 0
    shown = json.loads(out)
    assert shown["table"] == "dead_letters" and shown["path"].endswith("meter_kwh_dead_letter")
    (bad_measure, not_json) = shown["rows"]
    assert (bad_measure["line_number"], not_json["line_number"], not_json["raw_line"]) == (2, 3, READINGS[2])
    assert bad_measure["raw_line"].startswith(READINGS[1][:-1])  # `lklab ingest` stamped an ingest_time
    assert all(row["reject_reason"] for row in shown["rows"])
    # the table's own name finds it too
    code, out, _ = lklab(capsys, "show", "meter_kwh_dead_letter", *chosen)
    assert code == 0 and out.splitlines()[-1].startswith("2 rows of dead_letters")

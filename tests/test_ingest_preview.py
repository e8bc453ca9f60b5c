"""``lklab ingest`` says what each file holds before it appends it (``lklab.line_preview``): lines
that look like the selected pipeline's events, dead letters by reason with the first line of
each as the file has it, the fields expected; a file mostly dead letters is called out, and
``--strict`` refuses it with nothing appended. Every line the preview calls a dead letter is one
when the pipeline reads the log."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import event_line

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "meters"
BILLING_FIELDS = "event_id, account_id, event_type, amount, currency, event_time"


def segments(lake: Path) -> list[str]:
    return sorted(p.name for p in (lake / "log").glob("segment-*")) if (lake / "log").exists() else []


def test_a_csv_file_is_called_out_and_each_reason_shown_with_its_first_line(lklab_here, tmp_path):
    csv = tmp_path / "events.csv"
    csv.write_text("id,ts,user,value\n1,2026-01-01,a,3\n")
    result = lklab_here("ingest", str(csv), "--lake", str(tmp_path / "lake"))
    assert result.returncode == 0
    assert result.stdout.splitlines()[1:] == [
        "  2 lines: 0 look like billing_windows events, 2 will be dead letters",
        "    not_an_object: 1, first line 2: 1,2026-01-01,a,3",  # JSON, a number: not an object
        "    not_json: 1, first line 1: id,ts,user,value",
        f"    expected: a JSON object per line with {BILLING_FIELDS}",
    ]
    assert result.stderr == (
        f"lklab ingest: {csv}: 2 of 2 lines will be dead letters: is it billing_windows's format? "
        "(first: id,ts,user,value)\n"
    )
    assert segments(tmp_path / "lake") == ["segment-000000000001.jsonl"]  # kept: the log is the record


def test_other_field_names_name_every_missing_field_and_the_line_as_sent(lklab_here, tmp_path):
    other = tmp_path / "other.jsonl"
    other.write_text('{"id": "1", "ts": "2026-01-05T10:00:00Z", "user": "u", "value": 3}\n' + event_line() + "\n")
    result = lklab_here("ingest", str(other), "--lake", str(tmp_path / "lake"))
    assert result.stdout.splitlines()[1:] == [
        "  2 lines: 1 look like billing_windows events, 1 will be dead letters "
        "(their values are checked when the pipeline reads them)",
        # every missing field named, not only the first; the line without the stamp ingest adds
        f"    missing_field ({BILLING_FIELDS}): 1, first line 1: "
        '{"id": "1", "ts": "2026-01-05T10:00:00Z", "user": "u", "value": 3}',
        f"    expected: a JSON object per line with {BILLING_FIELDS}",
    ]
    assert result.stderr == ""  # half the file is not most of it


def test_strict_refuses_a_file_mostly_dead_letters_and_appends_nothing(lklab_here, tmp_path):
    good, bad = tmp_path / "good.jsonl", tmp_path / "bad.jsonl"
    good.write_text(event_line() + "\n")
    bad.write_text("not json\n" + event_line(event_id=None) + "\n" + event_line(event_id="e-2") + "\n")
    lake = tmp_path / "lake"
    result = lklab_here("ingest", "--strict", str(good), str(bad), "--lake", str(lake))
    assert result.returncode == 2
    assert result.stderr.splitlines()[-1] == (
        f"lklab ingest: --strict: more than 50% of the lines of {bad} would be dead letters; nothing was appended"
    )
    assert segments(lake) == []
    assert lklab_here("ingest", "--strict", str(good), "--lake", str(lake)).returncode == 0
    assert segments(lake) == ["segment-000000000001.jsonl"]


def test_bytes_that_are_not_utf8_and_a_line_too_long(lklab_here, tmp_path):
    odd = tmp_path / "odd.jsonl"
    odd.write_bytes(
        b"\xef\xbb\xbf" + event_line().encode() + b"\n" + b'{"x": "\xff"}\n' + b'{"pad": "' + b"a" * 300 + b'"}\n'
    )
    result = lklab_here("ingest", str(odd), "--lake", str(tmp_path / "lake"), env={"LKLAB_MAX_LINE_BYTES": "200"})
    lines = result.stdout.splitlines()[1:]
    # the byte order mark opens the file: not part of its first line, a valid event
    assert (
        lines[0]
        == "  3 lines: 1 look like billing_windows events, 2 will be dead letters (their values are checked when the pipeline reads them)"
    )
    assert (
        lines[1] == '    invalid_utf8 (raw_line holds the line\'s 10 bytes in base64): 1, first line 2: {"x": "\\xff"}'
    )
    # 310 bytes: longer than 200; shown cut at 160 characters
    assert (
        lines[2].startswith("    line_too_long (")
        and lines[2].endswith("…")
        and ', first line 3: {"pad": "aaa' in lines[2]
    )


def test_the_preview_reads_each_line_as_sent_with_the_appends_stamp(lklab_here, tmp_path):
    """A line is as long as it was sent (the stamp is not in it), and a line without
    ``ingest_time`` is dated by the append: one dated 2099 is ahead of it."""
    from shared.eventlog import EventLog

    fits = event_line(ingest_time=None, account_id="a" * 10)
    fits = fits[:-1] + " " * (200 - len(fits)) + "}"  # exactly max-line-bytes
    ahead = event_line(event_time="2099-01-01T00:00:00Z", ingest_time=None)
    path = tmp_path / "sent.jsonl"
    path.write_text(f"{fits}\n{ahead}\n")
    lake = tmp_path / "lake"
    result = lklab_here("ingest", str(path), "--lake", str(lake), env={"LKLAB_MAX_LINE_BYTES": "200"})
    lines = result.stdout.splitlines()[1:]
    assert lines[0].startswith("  2 lines: 1 look like billing_windows events, 1 will be dead letters")
    stamp = EventLog(lake).stamp(1)
    assert lines[1] == (
        "    event_time_in_future (event_time 2099-01-01T00:00:00Z is more than 5m (max-clock-skew) ahead of "
        f"ingest_time {stamp}): 1, first line 2: {ahead}"
    )
    assert EventLog.read_lines(EventLog(lake).segment_path(1)) == [fits, ahead]


def test_a_declared_pipeline_is_checked_by_its_own_parser(lklab_here, tmp_path):
    """The example's second file: the reading whose kwh is ``"abc"`` is the dead letter the batch
    writes (``tests/test_declared_jobs.py``), with the same reason and detail."""
    config = tmp_path / "meters.toml"
    config.write_text((EXAMPLE / "meters.toml").read_text())
    files = [str(EXAMPLE / f"readings-{n}.jsonl") for n in (2, 3)]
    result = lklab_here("ingest", "--pipeline", "meter_kwh", "--config", str(config), *files, cwd=tmp_path)
    assert result.returncode == 0 and result.stderr == ""
    lines = result.stdout.splitlines()
    assert lines[1:4] == [
        "  5 lines: 4 are meter_kwh events, 1 will be dead letters",
        '    invalid_measure (kwh): 1, first line 3: {"reading_id": "r07", "meter": "m2", "region": "south", '
        '"read_at": "2026-01-05T10:06:00Z", "kwh": "abc", "pulses": 5, "received_at": "2026-01-05T10:06:01Z"}',
        "    expected: a JSON object per line with reading_id, meter, region, kwh, pulses, read_at",
    ]
    assert lines[5] == "  5 lines: 4 are meter_kwh events, 1 heartbeats, 0 will be dead letters"


@pytest.mark.parametrize("seed", [7])
def test_every_line_the_preview_refuses_is_a_dead_letter_of_billing_with_that_reason(spark, lklab_here, tmp_path, seed):
    """Billing's parser runs in Spark; the preview runs the checks every line gets, the fields and
    the event time. Whatever it refuses, the pipeline refuses for the same reason; what it passes,
    the pipeline may still refuse (an unknown currency here)."""
    from shared.eventlog import EventLog
    from shared.events import parse_events
    from shared.log_source import raw_log

    lines = [
        event_line(),
        "[1, 2]",
        event_line(amount=None),
        event_line(event_time="yesterday"),
        event_line(event_time="2030-01-01T00:00:00Z"),  # ahead of its ingest time by years
        event_line(currency="ZZZ"),
        "",
        '{"event_id": "a", "event_id": "b"}',
    ]
    path = tmp_path / "mixed.jsonl"
    path.write_text("\n".join(lines) + "\n")
    lake = tmp_path / "lake"
    result = lklab_here("ingest", str(path), "--lake", str(lake))
    shown = {line.split(":")[0].strip().split(" ")[0]: line for line in result.stdout.splitlines()[2:-1]}
    parsed = parse_events(raw_log(spark, str(lake), EventLog(str(lake)).last_segment())).toArrow().to_pylist()
    refused = {row["line_number"]: row["reject_reason"] for row in parsed if row["reject_reason"]}
    assert refused == {
        2: "not_an_object",
        3: "missing_field",
        4: "invalid_event_time",
        5: "event_time_in_future",
        6: "invalid_currency",
        7: "empty_line",
        8: "duplicate_key",
    }
    assert sorted(shown) == sorted(set(refused.values()) - {"invalid_currency"})
    assert result.stdout.splitlines()[1] == (
        "  8 lines: 2 look like billing_windows events, 6 will be dead letters "
        "(their values are checked when the pipeline reads them)"
    )
    assert json.loads(lines[0])["event_id"] == "e-1"

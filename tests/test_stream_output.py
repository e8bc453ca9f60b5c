"""What ``lklab speed`` shows while it runs (``lklab.cli.stream_output``): each micro-batch's
record as JSON or as a sentence, none with ``--quiet``, and the segments read of the log."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from lklab.cli.stream_output import as_text, last_segment_of

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "meters"
CONFIG = ["--pipeline", "meter_kwh", "--config", "meters.toml"]

BILLING = {
    "event": "micro-batch",
    "stream": "speed",
    "batch": 12,
    "segments": [13, 13],
    "lines": 1052,
    "late": 1,
    "watermark": "2026-01-05T10:12:00+00:00",
    "seconds": 0.25,
}
DECLARED = {
    "event": "micro-batch",
    "stream": "meter_kwh-speed",
    "batch": 0,
    "first_segment": 1,
    "last_segment": 4,
    "input_lines": 20,
    "late_events": 2,
    "seconds": 1.5,
}


def test_a_record_as_a_sentence_whichever_way_its_pipeline_names_the_segments():
    assert as_text(BILLING) == (
        "speed batch 12 (0.25 s): segments 13..13, lines 1,052, late 1, watermark 2026-01-05T10:12:00+00:00"
    )
    assert as_text(DECLARED) == "meter_kwh-speed batch 0 (1.5 s): segments 1..4, input lines 20, late events 2"
    assert (last_segment_of(BILLING), last_segment_of(DECLARED), last_segment_of({"batch": 3})) == (13, 4, None)


@pytest.fixture(scope="module")
def meters(tmp_path_factory):
    home = tmp_path_factory.mktemp("speed-output") / "meters"
    shutil.copytree(EXAMPLE, home)
    return home


def _lines(text: str) -> list[str]:
    return [re.sub(r"^\[\d\d:\d\d:\d\d\] ", "", line) for line in text.splitlines()]


@pytest.mark.parametrize(
    "flags, shown",
    [
        (
            ["--log-format", "text"],
            [
                "meter_kwh-speed batch 0 (S s): segments 1..1, input lines 5, events 5, late events 0",
                "meter_kwh-speed batch 1 (S s): segments 2..2, input lines 5, events 3, late events 0",
                "meter_kwh-speed batch 2 (S s): segments 3..3, input lines 5, events 3, late events 1",
                "meter_kwh-speed batch 3 (S s): segments 4..4, input lines 5, events 4, late events 1",
            ],
        ),
        (["--quiet"], []),
    ],
)
def test_speed_shows_each_micro_batch_as_asked(spark, meters, lklab_here, flags, shown):
    lake = f"lake-{flags[0]}"
    assert lklab_here("ingest", *CONFIG, "--lake", lake, *sorted(p.name for p in meters.glob("*.jsonl")), cwd=meters)
    done = lklab_here("speed", *CONFIG, "--lake", lake, "--available-now", *flags, cwd=meters)
    assert done.returncode == 0, done.stderr[-3000:]
    records = [
        re.sub(r"\(\d+(\.\d+)? s\)", "(S s)", line).split(", duplicates")[0]
        for line in _lines(done.stderr)
        if "meter_kwh-speed batch" in line
    ]
    assert records == shown
    assert not any(line.lstrip().startswith("{") or '{"event"' in line for line in done.stderr.splitlines())
    # the segments read of the log's 4, whatever is shown of each micro-batch
    assert "segments read: 4/4" in done.stderr or "segments read: 4/4 (100%)" in done.stderr
    assert done.stdout.startswith("4 micro-batches: 20 lines = 15 events + 2 late events")


def test_speed_prints_json_records_where_stderr_is_no_terminal(spark, meters, lklab_here):
    lake = "lake-json"
    lklab_here("ingest", *CONFIG, "--lake", lake, *sorted(p.name for p in meters.glob("*.jsonl")), cwd=meters)
    done = lklab_here("speed", *CONFIG, "--lake", lake, "--available-now", "--segments-per-batch", "4", cwd=meters)
    (record,) = [
        json.loads(line.split(" lklab.meter_kwh ", 1)[1])
        for line in done.stderr.splitlines()
        if " lklab.meter_kwh {" in line
    ]
    assert (record["batch"], record["first_segment"], record["last_segment"], record["input_lines"]) == (0, 1, 4, 20)


def test_records_go_to_a_file_during_a_comparison_and_stderr_only_when_verbose(tmp_path, capsys):
    import logging

    from lklab.cli.stream_output import records_to_file
    from lklab.progress import configure_logging

    configure_logging()
    name = "lklab.test-comparison-stream"
    record = json.dumps(BILLING)
    with records_to_file(name, tmp_path / "r" / "streams.log"):
        logging.getLogger(name).info(record)
    assert capsys.readouterr().err == ""  # not through the lab's [HH:MM:SS] lines either
    with records_to_file(name, tmp_path / "r" / "streams.log", verbose=True):
        logging.getLogger(name).info(record)
    assert record in capsys.readouterr().err
    lines = (tmp_path / "r" / "streams.log").read_text().splitlines()
    assert len(lines) == 2 and all(line.endswith(f"{name} {record}") for line in lines)
    logging.getLogger(name).info(record)  # afterwards: as before, through the lab's logger
    assert re.search(r"\[\d\d:\d\d:\d\d\] " + re.escape(record), capsys.readouterr().err)

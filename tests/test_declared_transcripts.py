"""Declared pipelines' scenario transcripts through the stream's step and the batch truth.

Each ``tests/transcripts/declared/*.yaml`` holds a declaration (its TOML section), the lines per
log segment in arrival order, and what must come out, the reason for each value beside it: the
stream's windows, its late rows, duplicates and dead letters, the batch truth, and what each
line became.

A line is written from its entry: ``id`` under the declared event id, ``t`` (seconds after
``BASE``) under the declared event time, the transcript's ``defaults`` then the entry's other
fields under their own names (a field given as null is left out), and the segment's ingest time
under the declared ingest-time field (else ``ingest_time``, as the log stamps it). ``raw`` is a
line as it is; ``heartbeat: true`` a heartbeat at the segment's ingest time. Segment ``k`` is
ingested at ``10_000 + k`` seconds: with the one-second watermark interval each segment is a
tick, so a segment's lines are judged by the largest event time of the segments before it minus
the delay. The log ends with a heartbeat segment one second after the last.

The stream path is ``declared_step`` over the log cut into micro-batches in every way segment
boundaries allow, and one line per micro-batch, each also with a restart at every cut: the rows
must be the same for every cut. The
batch path is ``DeclaredTruth`` through the truth runner over the same log in a lake. Every
truth window is the stream's plus its late rows.
"""

from __future__ import annotations

import itertools
import json
import tomllib
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import pytest
import yaml

from lklab.pipelines.declared.declaration import Declaration, declarations
from shared.eventlog import heartbeat_line
from tests.declared_logs import StreamRows, run_batch, segment_cuts, stream_of, truth_windows

BASE = datetime(2026, 1, 5, 10, 0, tzinfo=UTC)
TRANSCRIPTS = sorted(Path(__file__).parent.joinpath("transcripts", "declared").glob("*.yaml"))


def at(seconds: float) -> datetime:
    return BASE + timedelta(seconds=seconds)


def iso(seconds: float) -> str:
    return at(seconds).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def seconds_of(moment: datetime) -> int:
    return int((moment - BASE).total_seconds())


def line_of(d: Declaration, entry: dict, defaults: dict, ingest: int) -> str:
    """One log line from a transcript's entry (the module docstring)."""
    if "raw" in entry:
        return entry["raw"]
    if entry.get("heartbeat"):
        return heartbeat_line(at(ingest))
    fields = {**defaults, **entry}
    value = {d.event_id: fields.pop("id")}
    if "t" in fields:
        value[d.event_time] = iso(fields.pop("t"))
    value.update(fields)
    value[d.ingest_time or "ingest_time"] = iso(ingest)
    return json.dumps({k: v for k, v in value.items() if v is not None})


def read(path: Path) -> tuple[Declaration, list[list[str]], dict]:
    """The transcript's declaration, its log's segments (the closing heartbeat's the last) and what it expects."""
    transcript = yaml.safe_load(path.read_text())
    (d,) = declarations(tomllib.loads(transcript["declaration"])).values()
    defaults = transcript.get("defaults", {})
    segments = [
        [line_of(d, entry, defaults, 10_000 + number) for entry in entries]
        for number, entries in enumerate(transcript["segments"], start=1)
    ]
    segments.append([heartbeat_line(at(10_000 + len(segments) + 1))])
    return d, segments, transcript["expect"]


def shown(measure, value):
    """A sum as a transcript writes it: a decimal's as its text (its scale shows), a long's as a
    whole number (held as a ``decimal(38, 0)``)."""
    if measure is not None and measure.type == "long":
        return int(value)
    return str(value) if isinstance(value, Decimal) else value


def window_list(windows: dict, d) -> list:
    kinds = [None, *d.measures]  # the count, then each measure's sum
    return sorted(
        [seconds_of(start), seconds_of(end), *keys, *(shown(m, v) for m, v in zip(kinds, totals))]
        for (start, end, *keys), totals in windows.items()
    )


def late_list(rows: list[dict]) -> list:
    return sorted(
        [r["event_id"], seconds_of(r["window_start"]), seconds_of(r["window_end"]), seconds_of(r["watermark"])]
        for r in rows
    )


def duplicate_list(rows: list[dict]) -> list:
    return sorted(
        [
            r["event_id"],
            r["segment"],
            r["line_number"],
            r["first_segment"],
            r["first_line_number"],
            r["payload_conflict"],
        ]
        for r in rows
    )


def dead_letter_list(rows: list[dict]) -> list:
    return sorted([r["segment"], r["line_number"], r["reject_reason"], r["reject_detail"]] for r in rows)


def every_cut(segments: list[list[str]]) -> list[list[int]]:
    """Every way to cut the log at segment boundaries, then one line per micro-batch."""
    boundaries = range(2, len(segments) + 1)
    cuts = [
        segment_cuts(segments, chosen)
        for size in range(len(boundaries) + 1)
        for chosen in itertools.combinations(boundaries, size)
    ]
    return [*cuts, list(range(1, sum(map(len, segments))))]


@pytest.fixture(params=TRANSCRIPTS, ids=[p.stem for p in TRANSCRIPTS])
def transcript(request):
    return read(request.param)


def check_stream(d, stream: StreamRows, expect: dict, lines: int) -> None:
    assert window_list(stream.windows, d) == sorted(expect["windows"])
    assert late_list(stream.late) == sorted(expect["late"])
    assert duplicate_list(stream.duplicates) == sorted(expect["duplicates"])
    assert dead_letter_list(stream.dead_letters) == sorted(expect["dead_letters"])
    assert stream.counts == {"input_lines": lines, **expect["counts"]}
    assert sum(v for k, v in stream.counts.items() if k != "input_lines") == lines


def test_the_stream_writes_the_transcripts_rows_whatever_the_cut(transcript):
    d, segments, expect = transcript
    lines = sum(map(len, segments))
    whole = stream_of(d, segments)
    check_stream(d, whole, expect, lines)
    cuts = every_cut(segments)
    assert len(cuts) == 2 ** (len(segments) - 1) + 1
    for cut in cuts:
        stream = stream_of(d, segments, cut)
        assert stream.batches == len(cut) + 1
        assert stream.comparable() == whole.comparable(), cut
        # a restart at every cut: the state read back from the rows it was committed as
        assert stream_of(d, segments, cut, restart=True).comparable() == whole.comparable(), cut


def test_the_truth_writes_the_transcripts_windows_and_is_the_stream_plus_its_late_rows(spark, tmp_path, transcript):
    d, segments, expect = transcript
    from tests.declared_logs import write_log

    write_log(tmp_path, segments)
    batch = run_batch(spark, tmp_path, d)
    truth = truth_windows(d, batch.truth)
    assert window_list(truth, d) == sorted(expect["truth"])
    assert batch.last_segment == len(segments)
    assert duplicate_list(batch.duplicates.to_pylist()) == sorted(expect["duplicates"])
    assert dead_letter_list(batch.dead_letters.to_pylist()) == sorted(expect["dead_letters"])
    counts = expect["counts"]
    assert batch.figures == {
        "lines": sum(map(len, segments)),
        "events": counts["events"] + counts["late_events"],
        "duplicates": counts["duplicates"],
        "dead_letters": counts["dead_letters"],
        "heartbeats": counts["heartbeats"],
    }

    stream = stream_of(d, segments)
    added = {key: list(totals) for key, totals in stream.windows.items()}
    for row in stream.late:
        key = (row["window_start"], row["window_end"], *(row[k] for k in d.keys))
        totals = added.setdefault(key, [0, *(0 for _ in d.measures)])
        totals[0] += 1
        for j, m in enumerate(d.measures, start=1):
            totals[j] += row[m.name]
    assert added == truth

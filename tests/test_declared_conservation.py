"""Property checks on random logs of a declared pipeline: every line in exactly one place, every
measure conserved, the same rows whatever the cut (and after a restart at every cut), and a
rerun of the truth changes nothing.

Four declarations (``DECLARATIONS``): tumbling windows; sliding ones with an allowed lateness
and a declared ingest-time field; a slide that does not divide the size (an event is in two or
three windows); and a watermark that moves after every line (``watermark-interval = "0s"``). A
random log (``random_log``) mixes new readings (meter 7 and "7" one key; a measure as text or
as a JSON number), resends (the same payload), resends with another payload, out-of-order and
late readings, heartbeats, and lines each failing one check: not JSON, a key named twice, not
an object, a field missing, a time without a zone, a time in the future, a kwh with more
decimals than its scale, a key that is neither text nor an integer, a long with a fraction. The generator knows what each line is, and which copy of each id is the first; the
checks compare the stream's step (``rule.declared_step``, Arrow) and the batch truth
(``DeclaredTruth``, Spark, on a few logs only) with that, and with windows computed here from
their definition (``[k * slide, k * slide + size)``), sharing no code with either path.

Event times span about a minute, well inside the dedup horizon (an hour): an id is never
forgotten, so the truth's dedup (no horizon) and the stream's agree.
"""

from __future__ import annotations

import json
import random
import tomllib
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lklab.pipelines.declared.declaration import Declaration, declarations
from shared.eventlog import heartbeat_line
from tests.declared_logs import run_batch, stream_of, truth_windows, write_log

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
SECOND = 1_000_000
BASE = 1_767_607_200 * SECOND  # 2026-01-05T10:00:00Z: times are microseconds since the epoch
INGEST = 1_000  # seconds after BASE of segment 0's ingest: every reading is before it

DECLARATIONS = """
[pipelines.tumbling]
kind = "windowed"
event-id = "reading_id"
event-time = "read_at"
keys = ["meter"]
window-kind = "tumbling"
window-size = "10s"
watermark-delay = "5s"
measures = { kwh = "decimal(9,2)", pulses = "long" }

[pipelines.sliding]
kind = "windowed"
event-id = "reading_id"
event-time = "read_at"
ingest-time = "received_at"
keys = ["meter"]
window-kind = "sliding"
window-size = "10s"
window-slide = "5s"
watermark-delay = "3s"
allowed-lateness = "4s"
measures = { kwh = "decimal(9,2)", pulses = "long" }

[pipelines.uneven]
kind = "windowed"
event-id = "reading_id"
event-time = "read_at"
keys = ["meter"]
window-kind = "sliding"
window-size = "10s"
window-slide = "4s"
watermark-delay = "2s"
measures = { kwh = "decimal(9,2)", pulses = "long" }

[pipelines.every_line]
kind = "windowed"
event-id = "reading_id"
event-time = "read_at"
keys = ["meter"]
window-kind = "sliding"
window-size = "15s"
window-slide = "5s"
watermark-delay = "0s"
watermark-interval = "0s"
measures = { kwh = "decimal(9,2)", pulses = "long" }
"""
DECLARED = declarations(tomllib.loads(DECLARATIONS))
MALFORMED = (
    "not_json",
    "duplicate_key",
    "not_an_object",
    "missing_field",
    "invalid_event_time",
    "event_time_in_future",
    "too_many_decimals",
    "wrong_key_type",
    "long_with_a_fraction",
)


def moment(micros: int) -> datetime:
    return EPOCH + timedelta(microseconds=micros)


def iso(micros: int) -> str:
    return moment(micros).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass
class RandomLog:
    """A log's segments and what the generator made each line: ``fates`` by (segment, line) is
    ``event`` (a first copy), ``duplicate``, ``dead_letter`` or ``heartbeat``; ``conflicts`` the
    duplicates whose payload differs from their first copy's; ``firsts`` each first copy's
    (event time in microseconds, meter as text, kwh, pulses)."""

    segments: list[list[str]] = field(default_factory=list)
    fates: dict[tuple[int, int], str] = field(default_factory=dict)
    conflicts: set[tuple[int, int]] = field(default_factory=set)
    firsts: dict[tuple[int, int], tuple] = field(default_factory=dict)

    @property
    def lines(self) -> int:
        return sum(map(len, self.segments))

    def where(self, fate: str) -> list[tuple[int, int]]:
        return sorted(p for p, f in self.fates.items() if f == fate)


def random_log(rng: random.Random, d: Declaration, max_segments: int = 6, max_lines: int = 8) -> RandomLog:
    """A random log of meter readings for ``d`` (the module docstring)."""
    log, payloads, next_id = RandomLog(), {}, 0
    for segment in range(1, rng.randint(1, max_segments) + 1):
        lines = []
        for number in range(1, rng.randint(1, max_lines) + 1):
            position = (segment, number)
            ingest = BASE + (INGEST + 2 * segment + rng.choice((0, 0, 0, 1, -3))) * SECOND  # sometimes going back
            kind = rng.choices(("new", "resend", "conflict", "heartbeat", "malformed"), (10, 2, 1, 1, 3))[0]
            if kind in ("resend", "conflict") and not payloads:
                kind = "new"
            if kind == "heartbeat":
                lines.append(heartbeat_line(moment(ingest)))
                log.fates[position] = "heartbeat"
                continue
            if kind in ("new", "malformed"):
                # a malformed line takes the id the next new reading takes: that reading's first
                # copy then comes after a dead letter of its id
                event_id = f"r{next_id}"
                event_time = (
                    BASE + (5 * segment + rng.randint(-25, 5)) * SECOND + rng.choice((0, rng.randint(0, 999_999)))
                )
                meter = rng.choice(("m1", "m2", 7, "7"))
                kwh = Decimal(rng.randint(-500, 5_000)).scaleb(-2)
                pulses = rng.randint(0, 1_000)
            if kind == "new":
                next_id += 1
                payloads[event_id] = (event_time, meter, kwh, pulses)
                log.firsts[position] = (event_time, str(meter), kwh, pulses)
                log.fates[position] = "event"
            elif kind != "malformed":
                event_id = rng.choice(sorted(payloads))
                event_time, meter, kwh, pulses = payloads[event_id]
                if kind == "conflict":
                    kwh += Decimal("0.01")
                    log.conflicts.add(position)
                log.fates[position] = "duplicate"
            value = {
                d.event_id: event_id,
                d.event_time: iso(event_time),
                "meter": meter,
                "kwh": rng.choice((str(kwh), float(kwh))),  # a JSON number's digits are read exactly
                "pulses": rng.choice((pulses, str(pulses))),
                d.ingest_time or "ingest_time": iso(ingest),
            }
            if kind == "malformed":
                value = _malformed(rng, rng.choice(MALFORMED), value, d, ingest)
                log.fates[position] = "dead_letter"
            lines.append(value if isinstance(value, str) else json.dumps(value))
        log.segments.append(lines)
    return log


def _malformed(rng: random.Random, how: str, value: dict, d: Declaration, ingest: int) -> dict | str:
    if how == "not_json":
        return json.dumps(value)[: rng.randint(1, 20)]
    if how == "duplicate_key":
        return json.dumps(value)[:-1] + f', "meter": "m{rng.randint(1, 2)}"}}'
    if how == "not_an_object":
        return json.dumps([value])
    if how == "missing_field":
        value.pop(rng.choice((d.event_id, d.event_time, "meter", "kwh", "pulses")))
    elif how == "invalid_event_time":
        value[d.event_time] = value[d.event_time].replace("T", " ")[:-1]
    elif how == "event_time_in_future":
        value[d.event_time] = iso(ingest + 3_600 * SECOND)
    elif how == "too_many_decimals":
        value["kwh"] = f"{rng.randint(-99, 99)}.{rng.randint(0, 99):02d}{rng.randint(1, 9)}"
    elif how == "wrong_key_type":
        value["meter"] = rng.choice((True, [7], 7.5, {"id": 7}))
    else:
        value["pulses"] = rng.choice((2.5, "2.5", 0.001))
    return value


def window_starts(d: Declaration, event_time: int) -> list[int]:
    """The windows holding ``event_time``, from their definition: ``k * slide <= t < k * slide + size``."""
    size = d.window.size
    slide = getattr(d.window, "slide", None) or size
    return [k * slide for k in range((event_time - size) // slide + 1, event_time // slide + 1)]


def oracle_truth(d: Declaration, log: RandomLog) -> dict[tuple, list]:
    """Every first copy counted in every window holding it, keyed as ``StreamRows.windows``."""
    windows = {}
    for event_time, meter, kwh, pulses in log.firsts.values():
        for start in window_starts(d, event_time):
            key = (moment(start), moment(start + d.window.size), meter)
            totals = windows.setdefault(key, [0, Decimal(0), 0])
            totals[0] += 1
            totals[1] += kwh
            totals[2] += pulses
    return windows


def stream_plus_late(d: Declaration, stream) -> dict[tuple, list]:
    added = {key: list(totals) for key, totals in stream.windows.items()}
    for row in stream.late:
        totals = added.setdefault((row["window_start"], row["window_end"], row["meter"]), [0, Decimal(0), 0])
        totals[0] += 1
        totals[1] += row["kwh"]
        totals[2] += row["pulses"]
    return added


def in_every_window(d: Declaration, log: RandomLog) -> list:
    """``[event_count, kwh, pulses]`` summed over the first copies, each times the windows holding it
    (``size / slide`` of them when the slide divides the size; 2 or 3 for a 10 s window every 4 s)."""
    firsts = [(len(window_starts(d, t)), kwh, pulses) for t, _, kwh, pulses in log.firsts.values()]
    return [sum(n for n, _, _ in firsts), sum(n * kwh for n, kwh, _ in firsts), sum(n * p for n, _, p in firsts)]


def check_conservation(d: Declaration, log: RandomLog, cuts: list[list[int]]) -> None:
    stream = stream_of(d, log.segments)
    positions = lambda rows: sorted((r["segment"], r["line_number"]) for r in rows)

    # every line in exactly one place
    assert stream.counts["input_lines"] == log.lines
    assert sum(v for k, v in stream.counts.items() if k != "input_lines") == log.lines
    assert positions(stream.dead_letters) == log.where("dead_letter")
    assert positions(stream.duplicates) == log.where("duplicate")
    conflicts = sorted((r["segment"], r["line_number"]) for r in stream.duplicates if r["payload_conflict"])
    assert conflicts == sorted(log.conflicts)
    assert stream.counts["heartbeats"] == len(log.where("heartbeat"))
    late_windows = {}
    for position in positions(stream.late):
        late_windows[position] = late_windows.get(position, 0) + 1
    assert set(late_windows) <= set(log.firsts)
    wholly_late = [p for p, n in late_windows.items() if n == len(window_starts(d, log.firsts[p][0]))]
    assert stream.counts["late_events"] == len(
        wholly_late
    )  # an event late in one window, counted in another, is an event
    assert stream.counts["events"] + stream.counts["late_events"] == len(log.firsts)

    # every measure conserved: the stream's windows and late rows are the truth
    added = stream_plus_late(d, stream)
    assert added == oracle_truth(d, log)
    assert [sum(t[j] for t in added.values()) for j in range(3)] == in_every_window(d, log)

    # the same rows whatever the cut, and after a restart at every cut
    for cut in cuts:
        assert stream_of(d, log.segments, cut).comparable() == stream.comparable(), cut
        assert stream_of(d, log.segments, cut, restart=True).comparable() == stream.comparable(), cut


@st.composite
def logs(draw):
    name = draw(st.sampled_from(sorted(DECLARED)))
    rng = draw(st.randoms(use_true_random=False))
    log = random_log(rng, DECLARED[name])
    cuts = [sorted(rng.sample(range(1, log.lines), min(k, log.lines - 1))) for k in (1, 3)] if log.lines > 1 else []
    return name, log, cuts


@settings(max_examples=100, deadline=None)
@given(logs())
def test_every_line_lands_once_and_every_measure_is_conserved_whatever_the_cut(case):
    name, log, cuts = case
    check_conservation(DECLARED[name], log, [*cuts, list(range(1, log.lines))])


def test_the_generator_makes_every_fate():
    """The random logs hold what the property is about: every fate, conflicts, late rows."""
    seen, late = set(), 0
    for seed in range(40):
        d = DECLARED["tumbling"]
        log = random_log(random.Random(seed), d)
        seen |= set(log.fates.values())
        late += len(stream_of(d, log.segments).late) > 0
        assert log.lines == len(log.fates)
    assert seen == {"event", "duplicate", "dead_letter", "heartbeat"}
    assert late >= 10


SPARK_LOGS = [("tumbling", 3), ("sliding", 11), ("uneven", 17), ("every_line", 33)]


@pytest.mark.parametrize("name, seed", SPARK_LOGS, ids=[name for name, _ in SPARK_LOGS])
def test_the_truth_is_the_stream_plus_its_late_rows_and_a_rerun_changes_nothing(spark, tmp_path, name, seed):
    d = DECLARED[name]
    log = random_log(random.Random(seed), d, max_segments=8, max_lines=12)
    stream = stream_of(d, log.segments)
    write_log(tmp_path, log.segments)
    batch = run_batch(spark, tmp_path, d)

    truth = truth_windows(d, batch.truth)
    assert truth == stream_plus_late(d, stream) == oracle_truth(d, log)
    assert [sum(t[j] for t in truth.values()) for j in range(3)] == in_every_window(d, log)
    dropped = lambda rows: sorted((r["segment"], r["line_number"], r["reject_reason"]) for r in rows)
    assert dropped(batch.dead_letters.to_pylist()) == dropped(stream.dead_letters)
    duplicate = lambda rows: sorted((r["segment"], r["line_number"], r["payload_conflict"]) for r in rows)
    assert duplicate(batch.duplicates.to_pylist()) == duplicate(stream.duplicates)
    assert batch.figures == {
        "lines": log.lines,
        "events": len(log.firsts),
        "duplicates": len(log.where("duplicate")),
        "dead_letters": len(log.where("dead_letter")),
        "heartbeats": len(log.where("heartbeat")),
    }

    from deltalake import DeltaTable

    from lklab.pipelines.declared.tables import tables_of

    versions = lambda: {t.name: DeltaTable(str(tmp_path / "tables" / t.name)).version() for t in tables_of(d).batch}
    before = versions()
    again = run_batch(spark, tmp_path, d)
    assert versions() == before
    assert truth_windows(d, again.truth) == truth
    assert again.figures == batch.figures


def test_two_valid_readings_whose_long_sum_passes_64_bits_are_summed_exactly(spark, tmp_path):
    """Each reading is within 64 bits (so no dead letter); their window's sum, 2**63, is not: a
    long's sum is a ``decimal(38, 0)``, exact in the stream and in the truth alike."""
    d = DECLARED["tumbling"]
    readings = [
        json.dumps(
            {
                d.event_id: event_id,
                d.event_time: iso(BASE + 3 * SECOND),
                "meter": "m1",
                "kwh": "1.00",
                "pulses": 2**62,  # within 64 bits: the parse takes it
                "ingest_time": iso(BASE + INGEST * SECOND),
            }
        )
        for event_id in ("a", "b")
    ]
    stream = stream_of(d, [readings])
    assert stream.counts["events"] == 2
    ((window, totals),) = stream.windows.items()
    assert totals == [2, Decimal("2.00"), 2**63]
    write_log(tmp_path, [readings])
    assert truth_windows(d, run_batch(spark, tmp_path, d).truth) == {window: [2, Decimal("2.00"), 2**63]}

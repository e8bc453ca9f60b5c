"""``lklab advise`` on a declared pipeline: each delay's late pairs and their measures are what the
declared stream writes at that delay (its rule walked over the log, as its replay walks it).

A seeded log of a few hundred readings (sliding windows, a decimal and a long measure, late
arrivals, resends, a dead letter, a heartbeat), no Spark.
"""

from __future__ import annotations

import dataclasses
import json
import tomllib
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import numpy as np
import pytest

from lklab.pipelines.declared.advice import advisor_log_of, check
from lklab.pipelines.declared.declaration import declarations
from lklab.pipelines.declared.parse import parse_declared_lines
from lklab.watermark_advisor import SECOND, point_at
from shared.eventlog import heartbeat_line
from shared.log_clock import by_line
from tests.declared_logs import raw_lines, walk

DECLARATION = """
[pipelines.meters]
kind = "windowed"
event-id = "reading_id"
event-time = "read_at"
keys = ["meter"]
window-kind = "sliding"
window-size = "20s"
window-slide = "10s"
watermark-delay = "5s"
allowed-lateness = "5s"

[pipelines.meters.measures]
kwh = "decimal(10,3)"
pulses = "long"
"""
BASE = datetime(2026, 1, 5, 10, 0, tzinfo=UTC)
DELAYS = (0, 7 * SECOND, 40 * SECOND)


def iso(seconds: float) -> str:
    return (BASE + timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def the_log() -> list[list[str]]:
    rng = np.random.default_rng(11)
    lines = []
    for number in range(400):
        arrives = number * 1.5
        late = rng.exponential(8) if rng.random() < 0.8 else rng.exponential(60)
        reading = {
            "reading_id": f"r{number}",
            "meter": f"m{rng.integers(3)}",
            "read_at": iso(arrives - late),
            "kwh": f"{rng.integers(-500, 5000) / 1000:.3f}",
            "pulses": int(rng.integers(0, 100)),
            "ingest_time": iso(arrives),
        }
        lines.append((arrives, json.dumps(reading)))
        if rng.random() < 0.05:  # a resend, up to two minutes later
            resent = arrives + rng.uniform(0, 120)
            lines.append((resent, json.dumps({**reading, "ingest_time": iso(resent)})))
    lines.append((200.0, "not json"))
    lines.append((700.0, heartbeat_line(BASE + timedelta(seconds=700))))
    ordered = [line for _, line in sorted(lines, key=lambda pair: pair[0])]
    return [ordered[i : i + 20] for i in range(0, len(ordered), 20)]


@pytest.fixture(scope="module")
def log():
    (d,) = declarations(tomllib.loads(DECLARATION)).values()
    return d, by_line(parse_declared_lines(d, raw_lines(the_log())))


@pytest.mark.parametrize("delay", DELAYS)
def test_each_point_is_what_the_declared_stream_writes(log, delay):
    d, parsed = log
    stream = walk(dataclasses.replace(d, watermark_delay=delay), parsed)
    point = point_at(advisor_log_of(d, parsed), delay)
    assert point.exact
    assert point.late_events == len(stream.late)
    assert point.late_events > 0 or delay == DELAYS[-1]
    sums = {name: sum((Decimal(row[name]) for row in stream.late), Decimal(0)) for name in ("kwh", "pulses")}
    assert dict(point.late_money) == {name: total for name, total in sums.items() if total}


def test_the_allowed_lateness_asked_for_replaces_the_declaration_s(log):
    d, parsed = log
    stream = walk(dataclasses.replace(d, watermark_delay=0, allowed_lateness=30 * SECOND), parsed)
    assert point_at(advisor_log_of(d, parsed, 30 * SECOND), 0).late_events == len(stream.late)


def test_sessions_are_refused():
    text = DECLARATION.replace('window-kind = "sliding"', 'window-kind = "session"\nsession-gap = "30s"')
    text = text.replace('window-size = "20s"\nwindow-slide = "10s"\n', "")
    (d,) = declarations(tomllib.loads(text)).values()
    with pytest.raises(ValueError, match="lklab advise"):
        check(d)

"""Deterministic readings for the ``running_max`` pipeline, by seed.

``readings`` readings of ``keys`` sensors, one every ``step`` of event time from 2026-01-05
00:00 UTC, values drawn from 0..1000; each lands a drawn 0-30 s after it happened, and the log
cuts a segment every ``segment_interval`` of ingest time. ``duplicate_rate`` of them are resent
10-60 s later (a retry: the same line), ``malformed_rate`` extra lines are not JSON. The same
seed writes the same log, byte for byte.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import ClassVar

import numpy as np

from lklab.generator_params import LogParams
from lklab.scenarios import EPOCH_START, SECOND
from shared.eventlog import EventLog, format_timestamp
from shared.generated_log import append_segments, ingest_segments
from shared.locks import whole_lake

__all__ = ["ReadingParams", "generate_readings"]


@dataclass(frozen=True)
class ReadingParams(LogParams):
    """What to generate, besides ``LogParams``': ``readings`` over ``keys``, one every ``step``
    microseconds, and the rate of exact resends."""

    counts: ClassVar[tuple[str, ...]] = ("readings", "keys")
    fractions: ClassVar[tuple[str, ...]] = ("duplicate_rate", "malformed_rate")

    readings: int = 1_000
    keys: int = 10
    step: int = SECOND
    duplicate_rate: float = 0.01


def _time(micros: int) -> str:
    return format_timestamp(datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=micros))


def generate_readings(params: ReadingParams, lake: str | Path, *, overwrite: bool = False) -> dict:
    """Write the readings' log to ``<lake>/log``; return counts. A lake that holds a log is
    refused unless ``overwrite`` (then its segments are replaced)."""
    rng = np.random.default_rng(params.seed)
    n = params.readings
    event_times = EPOCH_START + np.arange(n, dtype=np.int64) * params.step
    ingest = event_times + rng.integers(0, 30, n) * SECOND
    keys, values = rng.integers(0, params.keys, n), rng.integers(0, 1001, n)
    lines = [
        json.dumps(
            {
                "event_id": f"r-{i:07d}",
                "event_time": _time(int(event_times[i])),
                "key": f"sensor-{keys[i]:03d}",
                "value": int(values[i]),
                "ingest_time": _time(int(ingest[i])),
            }
        )
        for i in range(n)
    ]
    resent = rng.choice(n, size=int(round(n * params.duplicate_rate)), replace=False)
    resent_at = ingest[resent] + rng.integers(10, 61, len(resent)) * SECOND
    lines += [lines[i].replace(_time(int(ingest[i])), _time(int(t))) for i, t in zip(resent, resent_at)]
    broken = int(round(n * params.malformed_rate))
    broken_at = ingest[rng.integers(0, n, broken)]
    lines += [f'{{"event_id": "bad-{i}", "value": ' for i in range(broken)]  # cut short: not JSON
    segments = ingest_segments(np.concatenate([ingest, resent_at, broken_at]), EPOCH_START, params.segment_interval)
    log = EventLog(lake)
    with whole_lake(Path(lake)):
        held = log.last_segment()
        if held and not overwrite:
            raise FileExistsError(
                f"{lake} already holds a log ({held} segments); choose another --lake or pass --overwrite"
            )
        for segment in sorted(log.root.glob("segment-*.jsonl")) if held else ():
            segment.unlink()
        append_segments(log, lines, segments)
    return {
        "readings": n,
        "duplicates": len(resent),
        "malformed": broken,
        "lines": len(lines),
        "segments": log.last_segment(),
    }

"""The running maximum per key: the ``running_max`` pipeline's rule, one micro-batch at a time.

Each reading's ``value`` raises its ``key``'s maximum when larger; ``events`` counts the
readings of the key. A later copy of an ``event_id`` (a producer's retry) counts once: it goes
to the duplicates with the line of its first copy, and ``payload_conflict`` when its key, value
or event time differ. A line that fails its checks goes to the dead letters with its reason. So
every line of a micro-batch lands in exactly one place: a reading, a duplicate, a dead letter or
a heartbeat (``conserved``).

There is no window and no watermark: a maximum over everything read is final for what was
read, so the stream and the batch truth agree exactly once the stream has read the whole log;
before that, the keys whose readings lie beyond its last segment differ (``unread``).

The state carried from one micro-batch to the next holds each key's maximum and count and the
first line of every event id seen, so it grows with the number of distinct ids: this pipeline
is the contract's smallest example, not a production design (``unique_visitors`` bounds its
state with a dedup horizon and a TTL).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc

from lklab.pipelines.running_max.parse import PARSED_SCHEMA
from shared.events import HEARTBEAT_FIELD
from shared.live_latency import LATENCY_FIELDS
from shared.micro_batch import StepRows
from shared.speed import DEAD_LETTER_SCHEMA

__all__ = [
    "MAXIMUM_SCHEMA",
    "DUPLICATE_SCHEMA",
    "METRICS_SCHEMA",
    "STATE_SCHEMA",
    "MaxState",
    "MaxBatch",
    "max_step",
    "state_table",
    "state_from_table",
]

MAXIMUM_SCHEMA = pa.schema(
    [
        pa.field("key", pa.string(), nullable=False),
        pa.field("max_value", pa.int64()),
        pa.field("events", pa.int64()),
        pa.field("updated_batch_id", pa.int64()),
    ]
)
_READING = ("event_id", "key", "value", "event_time", "segment", "line_number")
DUPLICATE_SCHEMA = pa.schema(
    [
        *(PARSED_SCHEMA.field(name) for name in _READING),
        pa.field("first_segment", pa.int64()),
        pa.field("first_line_number", pa.int64()),
        pa.field("payload_conflict", pa.bool_()),
        pa.field("batch_id", pa.int64()),
    ]
)
_COUNTS = ("input_lines", "readings", "duplicates", "dead_letters", "heartbeats")
METRICS_SCHEMA = pa.schema(
    [
        pa.field("batch_id", pa.int64(), nullable=False),
        pa.field("first_segment", pa.int64()),
        pa.field("last_segment", pa.int64()),
        *(pa.field(name, pa.int64()) for name in _COUNTS),
        *LATENCY_FIELDS,  # set by the live runner
    ]
)
# One table, two kinds of rows: ``max`` (key, max_value, events) and ``seen`` (an event id, its
# first line and payload).
_MAXIMUM = ("key", "max_value", "events")
STATE_SCHEMA = pa.schema(
    [
        pa.field("kind", pa.string()),
        *(pa.field(name, MAXIMUM_SCHEMA.field(name).type) for name in _MAXIMUM),
        *(PARSED_SCHEMA.field(name) for name in _READING if name not in _MAXIMUM),
    ]
)


@dataclass
class MaxState:
    """``maxima``: key -> (max value, readings); ``seen``: event id -> (key, value, event time,
    segment, line number) of its first copy."""

    maxima: dict[str, tuple[int, int]] = field(default_factory=dict)
    seen: dict[str, tuple] = field(default_factory=dict)


@dataclass(frozen=True)
class MaxBatch(StepRows[MaxState]):
    """One micro-batch's results: the keys it changed (``changes``), and what every step returns."""

    changes: pa.Table

    @property
    def conserved(self) -> bool:
        row = self.metrics.to_pylist()[0]
        return row["input_lines"] == row["readings"] + row["duplicates"] + row["dead_letters"] + row["heartbeats"]


def max_step(parsed: pa.Table, before: MaxState, batch_id: int) -> MaxBatch:
    """Micro-batch ``batch_id``'s parsed lines (``PARSED_SCHEMA``, log order) against ``before``
    (left unchanged)."""
    state = MaxState(dict(before.maxima), dict(before.seen))
    duplicates, dead_letters, changed, counts = [], [], set(), dict.fromkeys(_COUNTS, 0)
    counts["input_lines"] = parsed.num_rows
    for line in parsed.to_pylist():
        if line["reject_reason"] is not None:
            dead_letters.append({**line, "batch_id": batch_id})
        elif line[HEARTBEAT_FIELD]:
            counts["heartbeats"] += 1
        elif line["event_id"] in state.seen:
            first = state.seen[line["event_id"]]
            payload = (line["key"], line["value"], line["event_time"])
            duplicates.append(
                {
                    **{name: line[name] for name in _READING},
                    "first_segment": first[3],
                    "first_line_number": first[4],
                    "payload_conflict": payload != first[:3],
                    "batch_id": batch_id,
                }
            )
        else:
            key, value = line["key"], line["value"]
            state.seen[line["event_id"]] = (key, value, line["event_time"], line["segment"], line["line_number"])
            maximum, events = state.maxima.get(key, (value, 0))
            state.maxima[key] = (max(maximum, value), events + 1)
            changed.add(key)
            counts["readings"] += 1
    counts["duplicates"], counts["dead_letters"] = len(duplicates), len(dead_letters)
    segments = parsed["segment"]
    metrics = {
        "batch_id": batch_id,
        "first_segment": pc.min(segments).as_py() if parsed.num_rows else None,
        "last_segment": pc.max(segments).as_py() if parsed.num_rows else None,
        **counts,
    }
    changes = [
        {"key": key, "max_value": state.maxima[key][0], "events": state.maxima[key][1], "updated_batch_id": batch_id}
        for key in sorted(changed)
    ]
    return MaxBatch(
        changes=pa.Table.from_pylist(changes, MAXIMUM_SCHEMA),
        duplicates=pa.Table.from_pylist(duplicates, DUPLICATE_SCHEMA),
        dead_letters=pa.Table.from_pylist(dead_letters, DEAD_LETTER_SCHEMA),
        metrics=pa.Table.from_pylist([metrics], METRICS_SCHEMA),
        state=state,
    )


def state_table(state: MaxState) -> pa.Table:
    """The state as ``STATE_SCHEMA`` rows (what ``max_state`` holds)."""
    maxima = [{"kind": "max", "key": k, "max_value": m, "events": n} for k, (m, n) in sorted(state.maxima.items())]
    names = ("key", "value", "event_time", "segment", "line_number")
    seen = [{"kind": "seen", "event_id": i, **dict(zip(names, first))} for i, first in sorted(state.seen.items())]
    return pa.Table.from_pylist(maxima + seen, STATE_SCHEMA)


def state_from_table(rows: pa.Table) -> MaxState:
    """``state_table``'s rows back into the state."""
    state = MaxState()
    for row in rows.to_pylist():
        if row["kind"] == "max":
            state.maxima[row["key"]] = (row["max_value"], row["events"])
        else:
            first = (row["key"], row["value"], row["event_time"], row["segment"], row["line_number"])
            state.seen[row["event_id"]] = first
    return state

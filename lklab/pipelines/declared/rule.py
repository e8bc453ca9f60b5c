"""The stream of a declared windowed pipeline, one micro-batch at a time (Arrow, no I/O).

``declared_step`` sends every parsed line of a micro-batch somewhere, in log order
``(segment, line_number)``, against the state carried from the micro-batch before:

1. **the log's clock** (``shared.clock.advance``): each line's processing time, the watermark
   ``W`` it is judged by (the largest event time of the ticks before its own, minus
   ``watermark-delay``) and ``W*``, the watermark after it; before any event ``W`` is unknown
   and nothing is late;
2. **dedup** by the event id (``shared.dedup``'s rule): a copy of an id remembered with
   ``remembered_from >= W - dedup_horizon`` is a duplicate (``payload_conflict`` when its keys,
   measures or event time differ from the first copy's); ``remembered_from`` is the later of
   the first copy's event time and its ``W``. An id forgotten past the horizon counts again;
3. **windows** (``window_counts``): tumbling or sliding, each (event, window) pair is
   **late** when ``W >= window_end + allowed_lateness``; sessions per the declared keys, the
   event joins (and merges) the held sessions its would-be session ``[t, t + gap)`` overlaps,
   else it is late when ``W >= t + gap + allowed_lateness``, else it opens one. A late pair
   goes to the side output with ``W``; otherwise the window of the event's keys counts it and
   adds each measure exactly. The micro-batch's window rows are the windows it changed, and for
   sessions a deleting row (``_delete``) for each session merged into another;
4. **the state** keeps the windows that can still change (a window or session leaves it once
   ``W*`` after the micro-batch reaches its end plus the allowed lateness: every later event for
   it is late, or opens a session of its own) and the ids still remembered.

Every line lands in exactly one place: an event counted in a window (``events``), an event no
window took (``late_events``), a duplicate, a dead letter or a heartbeat. Every decision
depends on the lines and the state alone, and the state after a line does not depend on where
the micro-batches were cut: the live stream, a restart and the replay's walk write the same
rows.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lklab.pipelines.declared.declaration import Declaration
from lklab.pipelines.declared.tables import (
    METRIC_COUNTS,
    duplicate_schema,
    late_schema,
    metrics_schema,
    state_schema,
    window_row,
)
from lklab.pipelines.declared.window_counts import window_counts
from shared.clock import NO_TIME, ClockSettings, ClockState, advance, line_keys
from shared.log_clock import by_line, event_times, micros_or_unknown
from shared.micro_batch import StepRows
from shared.speed import DEAD_LETTER_SCHEMA

__all__ = [
    "DeclaredState",
    "DeclaredBatch",
    "declared_step",
    "state_table",
    "state_from_table",
]

_CLOCK = ("processing_time", "tick", "max_before_tick", "max_in_tick")


@dataclass
class DeclaredState:
    """``windows``: (start, end, *keys) -> [event count, *sums] of the windows (or sessions) still open;
    ``seen``: event id -> (remembered_from, segment, line_number, payload) of its first copy;
    ``clock``: the log's clock after the last line. ``seen_rows``: ``seen`` as the state table's
    rows (Arrow), kept beside it so that a micro-batch converts only the ids it remembers anew,
    not every id remembered (None: built from ``seen`` when asked)."""

    clock: ClockState = field(default_factory=ClockState)
    seen: dict[str, tuple] = field(default_factory=dict)
    windows: dict[tuple, list] = field(default_factory=dict)
    seen_rows: pa.Table | None = None


@dataclass(frozen=True)
class DeclaredBatch(StepRows[DeclaredState]):
    """One micro-batch's rows: the windows it changed (their totals) and the late side output,
    and what every step returns (duplicates, dead letters, its metrics row, the state after it)."""

    windows: pa.Table
    late: pa.Table

    @property
    def figures(self) -> dict:
        """The metrics row as the stream's log line reports it (the watermark as ISO-8601 text)."""
        row = self.metrics.to_pylist()[0]
        watermark = row.pop("watermark")
        return {**{k: v for k, v in row.items() if k != "batch_id"}, "watermark": watermark and watermark.isoformat()}

    def timed(self, seconds: float) -> DeclaredBatch:
        """This batch with its metrics row's ``duration_seconds``: how long its step took."""
        at = self.metrics.schema.get_field_index("duration_seconds")
        column = pa.array([seconds], pa.float64())
        return dataclasses.replace(self, metrics=self.metrics.set_column(at, "duration_seconds", column))


def declared_step(d: Declaration, parsed: pa.Table, before: DeclaredState, batch_id: int) -> DeclaredBatch:
    """Micro-batch ``batch_id``'s parsed lines (``parse.parsed_schema_of(d)``) against ``before``
    (left unchanged): the module docstring."""
    settings = ClockSettings(d.watermark_delay, d.watermark_interval)
    parsed = by_line(parsed)
    keys = line_keys(
        np.asarray(parsed["segment"].to_numpy(), np.int64), np.asarray(parsed["line_number"].to_numpy(), np.int64)
    )
    run = advance(before.clock, settings, keys, micros_or_unknown(parsed["ingest_time"]), event_times(parsed))
    times = micros_or_unknown(parsed["event_time"])
    state = DeclaredState(run.state, dict(before.seen), {k: list(v) for k, v in before.windows.items()})
    windows = window_counts(d, state.windows)
    measures = [m.name for m in d.measures]
    late, duplicates, dead_letters = [], [], []
    remembered: dict[str, tuple] = {}  # the ids this micro-batch remembers anew
    counts = dict.fromkeys(METRIC_COUNTS, 0)
    counts["input_lines"] = parsed.num_rows
    for i, line in enumerate(parsed.to_pylist()):
        if line["reject_reason"] is not None:
            dead_letters.append({**line, "batch_id": batch_id})
            continue
        if line["heartbeat"]:
            counts["heartbeats"] += 1
            continue
        mark, event_time = int(run.watermark[i]), int(times[i])
        payload = (*(line[k] for k in d.keys), *(line[m] for m in measures), event_time)
        first = state.seen.get(line["event_id"])
        if first is not None and (mark == NO_TIME or first[0] >= mark - d.dedup_horizon):
            duplicates.append(
                {
                    **line,
                    "first_segment": first[1],
                    "first_line_number": first[2],
                    "payload_conflict": payload != first[3],
                    "batch_id": batch_id,
                }
            )
            continue
        state.seen[line["event_id"]] = remembered[line["event_id"]] = (
            max(event_time, mark),
            line["segment"],
            line["line_number"],
            payload,
        )
        missed, counted = windows.count(line, event_time, mark)
        for start, end in missed:
            late.append({**line, "window_start": start, "window_end": end, "watermark": mark, "batch_id": batch_id})
        counts["events" if counted else "late_events"] += 1
    counts["duplicates"], counts["dead_letters"] = len(duplicates), len(dead_letters)
    after = int(run.watermark_after[-1]) if parsed.num_rows else _known(before.clock.watermark_after(settings))
    changes = windows.changes()
    state.windows = windows.held()
    rows = _seen_rows(d, before)  # the ids remembered anew replace their rows
    rows = rows.filter(pc.invert(pc.is_in(rows["event_id"], pa.array(list(remembered), pa.string()))))
    rows = pa.concat_tables([rows, _rows_of(d, remembered)])
    if after != NO_TIME:  # what can no longer change leaves the state
        state.windows = {k: v for k, v in state.windows.items() if after < k[1] + d.allowed_lateness}
        kept = pc.greater_equal(rows["remembered_from"], after - d.dedup_horizon)
        for event_id in rows.filter(pc.invert(kept))["event_id"].to_pylist():
            del state.seen[event_id]
        rows = rows.filter(kept)
    state.seen_rows = rows
    processing = int(run.processing_time[-1]) if parsed.num_rows else _known(before.clock.processing_time)
    metrics = {
        "batch_id": batch_id,
        "first_segment": pc.min(parsed["segment"]).as_py() if parsed.num_rows else None,
        "last_segment": pc.max(parsed["segment"]).as_py() if parsed.num_rows else None,
        **counts,
        "watermark": None if after == NO_TIME else after,
        "watermark_lag_seconds": None if NO_TIME in (after, processing) else (processing - after) / 1e6,
        "duration_seconds": None,  # the stream times its step (``DeclaredBatch.timed``)
    }
    return DeclaredBatch(
        windows=changes,
        late=pa.Table.from_pylist(late, late_schema(d)),
        duplicates=pa.Table.from_pylist(duplicates, duplicate_schema(d)),
        dead_letters=pa.Table.from_pylist(dead_letters, DEAD_LETTER_SCHEMA),
        metrics=pa.Table.from_pylist([metrics], metrics_schema(d)),
        state=state,
    )


def _known(value: int | None) -> int:
    return NO_TIME if value is None else int(value)


def _rows_of(d: Declaration, seen: dict[str, tuple]) -> pa.Table:
    """Remembered ids as the state table's ``seen`` rows."""
    names = (*d.keys, *(m.name for m in d.measures))
    rows = []
    for event_id, (since, segment, line_number, payload) in seen.items():
        *values, event_time = payload
        rows.append(
            {
                "kind": "seen",
                "event_id": event_id,
                **dict(zip(names, values)),
                "event_time": event_time,
                "segment": segment,
                "line_number": line_number,
                "remembered_from": since,
            }
        )
    return pa.Table.from_pylist(rows, state_schema(d))


def _seen_rows(d: Declaration, state: DeclaredState) -> pa.Table:
    return state.seen_rows if state.seen_rows is not None else _rows_of(d, state.seen)


def state_table(d: Declaration, state: DeclaredState) -> pa.Table:
    """The state as ``tables.state_schema(d)`` rows: the open windows, the ids remembered (by id), the clock."""
    windows = [{"kind": "window", **window_row(d, key, totals)} for key, totals in sorted(state.windows.items())]
    clock = {"kind": "clock", **{name: getattr(state.clock, name) for name in _CLOCK}}
    seen = _seen_rows(d, state)
    return pa.concat_tables(
        [
            pa.Table.from_pylist(windows, state_schema(d)),
            seen.take(pc.sort_indices(seen, sort_keys=[("event_id", "ascending")])),
            pa.Table.from_pylist([clock], state_schema(d)),
        ]
    )


def state_from_table(d: Declaration, rows: pa.Table) -> DeclaredState:
    """``state_table``'s rows back into the state."""
    state = DeclaredState()
    measures = [m.name for m in d.measures]
    for row in rows.cast(state_schema(d)).to_pylist():
        if row["kind"] == "window":
            key = (_micros(row["window_start"]), _micros(row["window_end"]), *(row[k] for k in d.keys))
            state.windows[key] = [row["event_count"], *(row[m] for m in measures)]
        elif row["kind"] == "seen":
            payload = (*(row[k] for k in d.keys), *(row[m] for m in measures), _micros(row["event_time"]))
            state.seen[row["event_id"]] = (row["remembered_from"], row["segment"], row["line_number"], payload)
        else:
            state.clock = ClockState(**{name: row[name] for name in _CLOCK})
    rows = rows.cast(state_schema(d))
    state.seen_rows = rows.filter(pc.equal(rows["kind"], "seen"))
    return state


def _micros(value) -> int:
    return int(pa.scalar(value, pa.timestamp("us", "UTC")).cast(pa.int64()).as_py())

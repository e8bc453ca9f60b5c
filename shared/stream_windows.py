"""Event-time windows as the stream serves them: on time or late per line, running totals.

Given first copies in log order, each with the watermark its line is judged by (``_w``) and the
one in force after it (``_w_after``, see ``shared.clock``), and the windows held from before:

* **Fixed windows** (tumbling, sliding): each (event, window) pair is judged on its own. It is
  *late* when ``_w >= window_end + allowed_lateness``: the side output gets it. Otherwise it
  counts; when ``_w >= window_end`` it is a *late update* of a window already final. No pair's
  decision depends on another's, so the totals are sums of the pairs that count.
* **Sessions** (per ``account_id, currency``), line by line (``shared.session_join``): an
  event that overlaps a held session joins it (merging every session it bridges) even if its
  own would-be session ``[t, t + gap)`` has closed; otherwise it is late when
  ``_w >= t + gap + allowed_lateness``, else it opens a session. A session is held while ``_w < window_end + allowed_lateness``; one
  no longer held is final and keeps its row, and a later event cannot join it.

A window is ``final`` once the watermark after a line has reached its end. ``window_step``
returns the windows whose row changed (``changes``: values, status, or ``_delete`` for a
session merged away), the ``late`` side output, per-event ``outcomes``, the windows still held
(``held``: the part of the state that can still change), and on request the ``history``: one row
per line that changed a window's row (the value after it, the status, the processing time), so
that what the stream served can be read at any moment of the log's clock.

The speed layer calls ``window_step`` on a micro-batch with the windows it holds; the Kappa
replay on every event of a set of keys at once, with nothing held. Both decide every line the
same way, since every rule reads only the line's own watermarks.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from shared.aggregation import (
    AGGREGATE_ARROW_SCHEMA,
    WINDOW_KEY,
    aggregate_windows_table,
)
from shared.clock import NO_TIME, Advances
from shared.events import EVENT_COLUMNS, EVENT_SCHEMA, UTC_MICROS
from shared.money import from_micros, running_sums, to_micros
from shared.session_join import join_session
from shared.watermark import (
    LATENESS_TYPE,
    is_final,
    is_late,
    is_late_update,
    lateness_seconds,
)
from shared.windows import SessionWindows, WindowSpec, assign_windows_table, micros

__all__ = [
    "WINDOW_ROW_SCHEMA",
    "WINDOW_CHANGE_SCHEMA",
    "LATE_SCHEMA",
    "HISTORY_SCHEMA",
    "OUTCOME_SCHEMA",
    "LIFETIME_SCHEMA",
    "WindowRun",
    "JudgedPairs",
    "window_step",
    "judge_pairs",
    "empty_held",
]

_BATCH = pa.field("batch_id", pa.int64(), nullable=False)
WINDOW_ROW_SCHEMA = pa.schema(
    [
        *AGGREGATE_ARROW_SCHEMA,
        pa.field("status", pa.string(), nullable=False),
        pa.field("updated_batch_id", pa.int64(), nullable=False),
        pa.field("updated_ingest_time", UTC_MICROS),
    ]
)
WINDOW_CHANGE_SCHEMA = pa.schema([*WINDOW_ROW_SCHEMA, pa.field("_delete", pa.bool_())])
LATE_SCHEMA = pa.schema(
    [
        *EVENT_SCHEMA,
        pa.field("window_start", UTC_MICROS),
        pa.field("window_end", UTC_MICROS),
        pa.field("watermark", UTC_MICROS),
        pa.field("lateness_seconds", LATENESS_TYPE),
        _BATCH,
    ]
)
HISTORY_SCHEMA = pa.schema(
    [
        *AGGREGATE_ARROW_SCHEMA,
        pa.field("status", pa.string()),
        pa.field("change", pa.string()),  # update | final | delete
        pa.field("late_update", pa.bool_()),
        pa.field("processing_time", UTC_MICROS),
        pa.field("segment", pa.int64()),
        pa.field("line_number", pa.int64()),
        pa.field("event_id", pa.string()),
        pa.field("event_time", UTC_MICROS),
        pa.field("ingest_time", UTC_MICROS),
        pa.field("amount", EVENT_SCHEMA.field("amount").type),
        pa.field("watermark", UTC_MICROS),
        _BATCH,
    ]
)
OUTCOME_SCHEMA = pa.schema(
    [
        pa.field("segment", pa.int64()),
        pa.field("batch_id", pa.int64()),
        pa.field("amount", EVENT_SCHEMA.field("amount").type),
        pa.field("currency", pa.string()),
        pa.field("late", pa.bool_()),
        pa.field("late_updates", pa.int64()),
    ]
)
# A window (version) the stream held: from the line that created it until the line that merged it
# away (NO_TIME: never) or until the watermark after a line reached ``expires`` (window end plus
# the allowed lateness).
LIFETIME_SCHEMA = pa.schema(
    [pa.field("created", pa.int64()), pa.field("replaced", pa.int64()), pa.field("expires", pa.int64())]
)


def open_windows(held: pa.Table) -> int:
    """How many of the windows ``held`` (``WINDOW_ROW_SCHEMA``) the watermark has not made final."""
    return int(pc.sum(pc.equal(held["status"], "open")).as_py() or 0)


def empty_held() -> pa.Table:
    return WINDOW_ROW_SCHEMA.empty_table()


@dataclass(frozen=True)
class WindowRun:
    changes: pa.Table
    late: pa.Table
    outcomes: pa.Table
    held: pa.Table
    history: pa.Table | None
    lifetimes: pa.Table


def window_step(
    spec: WindowSpec,
    allowed_lateness: int,
    events: pa.Table,
    held: pa.Table,
    advances: Advances,
    *,
    history: bool = False,
) -> WindowRun:
    """Judge ``events`` (first copies in log order with ``_line``, ``_p``, ``_w``, ``_w_after``,
    ``batch_id``) against the windows ``held`` (``WINDOW_ROW_SCHEMA``); see the module docstring."""
    return spec.pick(fixed=_fixed, merging=_sessions)(spec, allowed_lateness, events, held, advances, history)


def _with(table: pa.Table, **columns) -> pa.Table:
    for name, values in columns.items():
        table = table.append_column(
            name, values if isinstance(values, (pa.Array, pa.ChunkedArray)) else pa.array(values)
        )
    return table


def _timestamps(values: np.ndarray) -> pa.Array:
    values = np.asarray(values, dtype=np.int64)
    return pa.array(values, pa.int64(), mask=values == NO_TIME).cast(UTC_MICROS)


def _late_rows(late: pa.Table) -> pa.Table:
    marks = late["_w"].to_numpy()
    rows = _with(
        late.select([*EVENT_COLUMNS, "window_start", "window_end"]),
        watermark=_timestamps(marks),
        lateness_seconds=lateness_seconds(micros(late["event_time"]), marks),
        batch_id=late["batch_id"],
    )
    return rows.cast(LATE_SCHEMA)


def _held_after(rows: pa.Table, advances: Advances, allowed_lateness: int) -> pa.Table:
    """The windows that can still change once the watermark is ``advances.after``."""
    if advances.after is None:
        return rows
    return rows.filter(pa.array(micros(rows["window_end"]) + allowed_lateness > advances.after))


def _keys(table: pa.Table) -> list[tuple]:
    return list(zip(*(table[name].to_pylist() for name in WINDOW_KEY)))


# ----------------------------------------------------------------------------- fixed windows


@dataclass(frozen=True)
class JudgedPairs:
    """Fixed windows: every (event, window) pair judged on its own (``judge_pairs``).

    ``on_time``: the pairs that count (``_late_update`` where the window was already final);
    ``late``: the side output (``LATE_SCHEMA``); ``outcomes``: per event (``OUTCOME_SCHEMA``)."""

    on_time: pa.Table
    late: pa.Table
    outcomes: pa.Table


def judge_pairs(spec, allowed_lateness: int, events: pa.Table) -> JudgedPairs:
    """Each (event, window) pair of ``events`` (first copies with ``_w``) against its line's
    watermark: late when ``_w >= window_end + allowed_lateness``, a late update when
    ``window_end <= _w`` but not late. No pair depends on another: any subset of the events
    (a micro-batch, a partition of the log) is judged as it would be with all of them."""
    pairs = assign_windows_table(spec, _with(events, _event=np.arange(events.num_rows)))
    ends, marks = micros(pairs["window_end"]), pairs["_w"].to_numpy()
    late_flags = is_late(ends, marks, allowed_lateness)
    update_flags = is_late_update(ends, marks, allowed_lateness)
    event = pairs["_event"].to_numpy()
    per_event = np.bincount(event, minlength=events.num_rows)
    all_late = np.bincount(event, weights=late_flags, minlength=events.num_rows) == per_event
    updates = np.bincount(event, weights=update_flags, minlength=events.num_rows).astype(np.int64)
    return JudgedPairs(
        on_time=_with(pairs, _late_update=update_flags).filter(pa.array(~late_flags)),
        late=_late_rows(pairs.filter(pa.array(late_flags))),
        outcomes=_outcomes(events, all_late, updates),
    )


def _fixed(
    spec, allowed_lateness: int, events: pa.Table, held: pa.Table, advances: Advances, history: bool
) -> WindowRun:
    judged = judge_pairs(spec, allowed_lateness, events)
    on_time = judged.on_time
    touched = aggregate_windows_table(on_time).join(
        on_time.group_by(list(WINDOW_KEY), use_threads=False).aggregate(
            [("_p", "max"), ("batch_id", "max"), ("_line", "min")]
        ),
        list(WINDOW_KEY),
    )
    rows = _combine(held, touched, advances)
    changed = pc.or_(rows["_touched"], pc.and_(pc.equal(rows["_was"], "open"), pc.equal(rows["status"], "final")))
    changes = rows.filter(changed).select(list(WINDOW_ROW_SCHEMA.names))
    changes = _with(changes, _delete=np.zeros(changes.num_rows, dtype=bool)).cast(WINDOW_CHANGE_SCHEMA)
    kept = _held_after(rows.select(list(WINDOW_ROW_SCHEMA.names)), advances, allowed_lateness).cast(WINDOW_ROW_SCHEMA)
    new = rows.filter(pc.and_(rows["_touched"], pc.invert(rows["_had"])))
    lifetimes = pa.table(
        {
            "created": new["_line_min"],
            "replaced": pa.array(np.full(new.num_rows, NO_TIME, dtype=np.int64)),
            "expires": pa.array(micros(new["window_end"]) + allowed_lateness),
        },
        schema=LIFETIME_SCHEMA,
    )
    return WindowRun(
        changes=changes,
        late=judged.late,
        outcomes=judged.outcomes,
        held=kept,
        history=_fixed_history(on_time, held, rows, advances) if history else None,
        lifetimes=lifetimes,
    )


def _outcomes(events: pa.Table, late: np.ndarray, late_updates: np.ndarray) -> pa.Table:
    return pa.table(
        {
            "segment": events["segment"],
            "batch_id": events["batch_id"],
            "amount": events["amount"],
            "currency": events["currency"],
            "late": pa.array(late, pa.bool_()),
            "late_updates": pa.array(late_updates, pa.int64()),
        },
        schema=OUTCOME_SCHEMA,
    )


def _combine(held: pa.Table, touched: pa.Table, advances: Advances) -> pa.Table:
    """Held windows and this run's on-time totals, added up, with the status after the run.

    Extra columns: ``_touched`` (the run changed the totals), ``_had`` (held before), ``_was``
    (status before: ``final`` or ``open``), ``_line_min`` (first line that counted in the run).
    The run's lines come after the held ones, so its batch id and processing time win by ``max``.
    """
    parts = [
        pa.table(
            {
                **{name: held[name] for name in WINDOW_KEY},
                "event_count": held["event_count"],
                "amount_total": held["amount_total"],
                "_touched": pa.array(np.zeros(held.num_rows, dtype=bool)),
                "_had": pa.array(np.ones(held.num_rows, dtype=bool)),
                "_was_final": pc.equal(held["status"], "final"),
                "_line": pa.nulls(held.num_rows, pa.int64()),
                "_batch": held["updated_batch_id"],
                "_ingest": held["updated_ingest_time"].cast(pa.int64()),
            }
        ),
        pa.table(
            {
                **{name: touched[name] for name in WINDOW_KEY},
                "event_count": touched["event_count"],
                "amount_total": touched["amount_total"],
                "_touched": pa.array(np.ones(touched.num_rows, dtype=bool)),
                "_had": pa.array(np.zeros(touched.num_rows, dtype=bool)),
                "_was_final": pa.array(np.zeros(touched.num_rows, dtype=bool)),
                "_line": touched["_line_min"],
                "_batch": touched["batch_id_max"],
                "_ingest": touched["_p_max"],
            }
        ),
    ]
    both = pa.concat_tables([part.cast(parts[1].schema) for part in parts])
    rows = both.group_by(list(WINDOW_KEY), use_threads=False).aggregate(
        [
            ("event_count", "sum"),
            ("amount_total", "sum"),
            ("_touched", "max"),
            ("_had", "max"),
            ("_was_final", "max"),
            ("_line", "min"),
            ("_batch", "max"),
            ("_ingest", "max"),
        ]
    )
    return pa.table(
        {
            **{name: rows[name] for name in WINDOW_KEY},
            "event_count": rows["event_count_sum"],
            "amount_total": rows["amount_total_sum"].cast(AGGREGATE_ARROW_SCHEMA.field("amount_total").type),
            "status": pa.array(
                np.where(is_final(micros(rows["window_end"]), advances.after), "final", "open"), pa.string()
            ),
            "updated_batch_id": rows["_batch_max"],
            "updated_ingest_time": rows["_ingest_max"].cast(UTC_MICROS),
            "_touched": rows["_touched_max"],
            "_had": rows["_had_max"],
            "_was": pa.array(
                np.where(rows["_was_final_max"].to_numpy(zero_copy_only=False), "final", "open"), pa.string()
            ),
            "_line_min": rows["_line_min"],
        }
    )


def _fixed_history(on_time: pa.Table, held: pa.Table, rows: pa.Table, advances: Advances) -> pa.Table:
    """One row per on-time pair (the window's value after it) and one per window the watermark
    made final without a pair on that line."""
    contributions = _with(
        on_time.select(
            [
                *WINDOW_KEY,
                "_line",
                "_p",
                "_w",
                "_w_after",
                "batch_id",
                "segment",
                "line_number",
                "event_id",
                "event_time",
                "ingest_time",
                "amount",
                "_late_update",
            ]
        ),
        _marker=np.zeros(on_time.num_rows, dtype=bool),
    )
    found = advances.finalising(micros(rows["window_end"]))
    # a window first counted in this run cannot be finalised before the line that opened it; one
    # held from before can, even when a late update touches it later in the run
    had = rows["_had"].to_numpy(zero_copy_only=False)
    opened = np.where(had, NO_TIME, rows["_line_min"].fill_null(NO_TIME).to_numpy(zero_copy_only=False))
    finalising = (found >= 0) & (advances.keys[np.maximum(found, 0)] >= opened) if len(advances.keys) else found >= 0
    finalised = rows.filter(pa.array(finalising))
    at = found[finalising]
    markers = _with(
        finalised.select(list(WINDOW_KEY)),
        _line=advances.keys[at],
        _p=advances.processing_time[at],
        _w=np.full(len(at), NO_TIME, dtype=np.int64),
        _w_after=advances.watermark_after[at],
        batch_id=advances.batch_id[at],
        segment=pa.nulls(len(at), pa.int64()),
        line_number=pa.nulls(len(at), pa.int64()),
        event_id=pa.nulls(len(at), pa.string()),
        event_time=pa.nulls(len(at), UTC_MICROS),
        ingest_time=pa.nulls(len(at), UTC_MICROS),
        amount=pa.nulls(len(at), contributions.schema.field("amount").type),
        _late_update=np.zeros(len(at), dtype=bool),
        _marker=np.ones(len(at), dtype=bool),
    )
    both = pa.concat_tables([contributions, markers.cast(contributions.schema)])
    both = both.take(
        pc.sort_indices(
            both, sort_keys=[*[(k, "ascending") for k in WINDOW_KEY], ("_line", "ascending"), ("_marker", "ascending")]
        )
    )
    return _history_rows(both, held)


def _history_rows(both: pa.Table, held: pa.Table) -> pa.Table:
    """Running values of contributions and markers sorted by window and line, on top of the
    values the windows were held with."""
    windows = _window_codes(both)
    starts = (
        np.flatnonzero(np.concatenate([[True], windows[1:] != windows[:-1]]))
        if len(windows)
        else np.zeros(0, dtype=np.int64)
    )
    held_values = {
        key: (n, a) for key, n, a in zip(_keys(held), held["event_count"].to_pylist(), held["amount_total"].to_pylist())
    }
    firsts = _keys(both.take(pa.array(starts, pa.int64())))
    base = [held_values.get(key, (0, None)) for key in firsts]
    sizes = np.diff(np.concatenate([starts, [len(windows)]]))
    base_count = np.repeat(np.array([n for n, _ in base], dtype=np.int64), sizes)
    base_money = np.repeat(_exact_ints([0 if a is None else int(a.scaleb(6)) for _, a in base]), sizes)
    marker = both["_marker"].to_numpy(zero_copy_only=False)
    counts = running_sums(np.where(marker, 0, 1).astype(np.int64), windows) + base_count
    money = _exact_add(running_sums(np.where(marker, 0, to_micros(both["amount"])), windows), base_money)
    # a marker on the same line as a pair of its window says nothing new: that pair's row is final
    lines = both["_line"].to_numpy()
    redundant = np.zeros(len(windows), dtype=bool)
    redundant[1:] = marker[1:] & (windows[1:] == windows[:-1]) & (lines[1:] == lines[:-1])
    rows = pa.table(
        {
            **{name: both[name] for name in WINDOW_KEY},
            "event_count": pa.array(counts, pa.int64()),
            "amount_total": from_micros(money),
            "status": pa.array(
                np.where(is_final(micros(both["window_end"]), both["_w_after"].to_numpy()), "final", "open"),
                pa.string(),
            ),
            "change": pa.array(np.where(marker, "final", "update"), pa.string()),
            "late_update": both["_late_update"],
            "processing_time": _timestamps(both["_p"].to_numpy()),
            "segment": both["segment"],
            "line_number": both["line_number"],
            "event_id": both["event_id"],
            "event_time": both["event_time"],
            "ingest_time": both["ingest_time"],
            "amount": both["amount"],
            "watermark": _timestamps(both["_w"].to_numpy()),
            "batch_id": both["batch_id"],
        }
    )
    return rows.filter(pa.array(~redundant)).cast(HISTORY_SCHEMA)


def _exact_ints(values: list[int]) -> np.ndarray:
    """Integers as int64 when they are small enough to add up safely, else as Python ints."""
    if all(abs(v) < 1 << 61 for v in values):
        return np.array(values, dtype=np.int64)
    return np.array(values, dtype=object)


def _exact_add(left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """Element-wise sum of two integer arrays without overflow."""
    if left.dtype != object and right.dtype != object:
        bound = max(np.abs(left).max(initial=0), np.abs(right).max(initial=0))
        if bound < 1 << 62:
            return left + right
    return np.array([int(a) + int(b) for a, b in zip(left, right)], dtype=object)


def _window_codes(table: pa.Table) -> np.ndarray:
    """An int per row that differs exactly where the window key differs from the row before."""
    if not table.num_rows:
        return np.zeros(0, dtype=np.int64)
    changes = np.zeros(table.num_rows - 1, dtype=bool)
    for name in WINDOW_KEY:
        column = table[name]
        changes |= ~pc.fill_null(pc.equal(column[1:], column[:-1]), False).to_numpy(zero_copy_only=False)
    return np.concatenate([[0], np.cumsum(changes)])


# ----------------------------------------------------------------------------- sessions


@dataclass
class _Version:
    """One shape of a session: ``[start, end)`` with its totals, from the line that made it
    (``created``; NO_TIME: held from before the run) until the line that merged it into a larger
    one (``replaced``)."""

    key: tuple[str, str]
    start: int
    end: int
    count: int
    micros: int
    batch: int
    processing_time: int
    created: int = NO_TIME
    replaced: int = NO_TIME
    event: int | None = None  # row of the event that made it
    status_before: str | None = None  # held from before the run: its status then

    @property
    def window(self) -> tuple:
        return (self.start, self.end, *self.key)


def _sessions(
    spec: SessionWindows, allowed_lateness: int, events: pa.Table, held: pa.Table, advances: Advances, history: bool
) -> WindowRun:
    return _Sessions(spec, allowed_lateness, advances, history).run(events, held)


class _Sessions:
    """Sessions, line by line (whether an event merges depends on what is held when it arrives)."""

    def __init__(self, spec: SessionWindows, allowed_lateness: int, advances: Advances, history: bool) -> None:
        self.gap, self.lateness, self.advances, self.history = spec.gap, allowed_lateness, advances, history

    def run(self, events: pa.Table, held: pa.Table) -> WindowRun:
        gap, lateness = self.gap, self.lateness
        versions = self._held_versions(held)
        active: dict[tuple, list[_Version]] = {}
        for version in versions:
            active.setdefault(version.key, []).append(version)
        late = np.zeros(events.num_rows, dtype=bool)
        line, processing, mark, batch = (
            events[c].to_numpy(zero_copy_only=False) for c in ("_line", "_p", "_w", "batch_id")
        )
        times, money = micros(events["event_time"]), to_micros(events["amount"])
        keys = list(zip(events["account_id"].to_pylist(), events["currency"].to_pylist()))
        for i, key in enumerate(keys):
            # the watermark never goes back: a session no longer held never is again
            joined = join_session(active.get(key, []), int(times[i]), int(mark[i]), gap, lateness)
            if joined.late:
                active[key] = joined.held
                late[i] = True
                continue
            touching = joined.touching
            merged = _Version(
                key=key,
                start=joined.start,
                end=joined.end,
                count=1 + sum(s.count for s in touching),
                micros=int(money[i]) + sum(s.micros for s in touching),
                batch=int(batch[i]),
                processing_time=int(processing[i]),
                created=int(line[i]),
                event=i,
            )
            for old in touching:
                old.replaced = int(line[i])
            active[key] = [*joined.apart, merged]
            versions.append(merged)
        return self._result(events, late, versions)

    @staticmethod
    def _held_versions(held: pa.Table) -> list[_Version]:
        starts, ends = micros(held["window_start"]), micros(held["window_end"])
        ingest = held["updated_ingest_time"].cast(pa.int64()).fill_null(NO_TIME).to_numpy(zero_copy_only=False)
        totals = to_micros(held["amount_total"])
        return [
            _Version(
                key=(a, c),
                start=int(s),
                end=int(e),
                count=n,
                micros=int(m),
                batch=b,
                processing_time=int(p),
                status_before=status,
            )
            for a, c, s, e, n, m, b, p, status in zip(
                held["account_id"].to_pylist(),
                held["currency"].to_pylist(),
                starts,
                ends,
                held["event_count"].to_pylist(),
                totals,
                held["updated_batch_id"].to_pylist(),
                ingest,
                held["status"].to_pylist(),
            )
        ]

    def _status(self, end: int) -> str:
        after = self.advances.after
        return "final" if after is not None and after >= end else "open"

    def _result(self, events: pa.Table, late: np.ndarray, versions: list[_Version]) -> WindowRun:
        alive = [v for v in versions if v.replaced == NO_TIME]
        changed = [
            v
            for v in alive
            if v.status_before is None or (v.status_before == "open" and self._status(v.end) == "final")
        ]
        alive_windows = {v.window for v in alive}
        deleted = sorted({v.window for v in versions if v.replaced != NO_TIME} - alive_windows)
        after, lateness = self.advances.after, self.lateness
        held = [v for v in alive if after is None or v.end + lateness > after]
        made = [v for v in versions if v.status_before is None]
        late_events = events.filter(pa.array(late))
        late_table = _with(
            late_events,
            window_start=late_events["event_time"],
            window_end=pa.array(micros(late_events["event_time"]) + self.gap).cast(UTC_MICROS),
        )
        return WindowRun(
            changes=pa.concat_tables(
                [
                    _with(self._rows(changed), _delete=np.zeros(len(changed), dtype=bool)).cast(WINDOW_CHANGE_SCHEMA),
                    _deletes(deleted),
                ]
            ),
            late=_late_rows(late_table),
            outcomes=_outcomes(events, late, np.zeros(events.num_rows, dtype=np.int64)),
            held=self._rows(held),
            history=self._history(events, versions) if self.history else None,
            lifetimes=pa.table(
                {
                    "created": pa.array([v.created for v in made], pa.int64()),
                    "replaced": pa.array([v.replaced for v in made], pa.int64()),
                    "expires": pa.array([v.end + lateness for v in made], pa.int64()),
                },
                schema=LIFETIME_SCHEMA,
            ),
        )

    def _rows(self, versions: list[_Version]) -> pa.Table:
        return pa.table(
            {
                "window_start": _timestamps(np.array([v.start for v in versions], dtype=np.int64)),
                "window_end": _timestamps(np.array([v.end for v in versions], dtype=np.int64)),
                "account_id": pa.array([v.key[0] for v in versions], pa.string()),
                "currency": pa.array([v.key[1] for v in versions], pa.string()),
                "event_count": pa.array([v.count for v in versions], pa.int64()),
                "amount_total": from_micros(np.array([v.micros for v in versions], dtype=object)),
                "status": pa.array([self._status(v.end) for v in versions], pa.string()),
                "updated_batch_id": pa.array([v.batch for v in versions], pa.int64()),
                "updated_ingest_time": _timestamps(np.array([v.processing_time for v in versions], dtype=np.int64)),
            }
        ).cast(WINDOW_ROW_SCHEMA)

    def _history(self, events: pa.Table, versions: list[_Version]) -> pa.Table:
        """Per version made in the run, an ``update`` row at the line that made it; per version,
        a ``final`` row where the watermark finalised it before anything replaced it, and a
        ``delete`` row at the line that merged it away."""
        advances = self.advances
        after_line = events["_w_after"].to_numpy(zero_copy_only=False)
        records = []
        for v in versions:
            if v.event is not None:
                final_then = after_line[v.event] != NO_TIME and after_line[v.event] >= v.end
                records.append((v, "update", "final" if final_then else "open", v.created, v.event))
                already_final = final_then
            else:
                already_final = v.status_before == "final"
            if not already_final:
                found = int(advances.finalising(np.array([v.end]))[0])
                if (
                    found >= 0
                    and advances.keys[found] > v.created
                    and (v.replaced == NO_TIME or advances.keys[found] < v.replaced)
                ):
                    records.append((v, "final", "final", int(advances.keys[found]), found))
            if v.replaced != NO_TIME:
                records.append((v, "delete", "open", v.replaced, None))
        return _session_history_table(records, events, advances)


def _deletes(windows: list[tuple]) -> pa.Table:
    """Change rows that remove sessions merged away."""
    count = len(windows)
    return pa.table(
        {
            "window_start": _timestamps(np.array([w[0] for w in windows], dtype=np.int64)),
            "window_end": _timestamps(np.array([w[1] for w in windows], dtype=np.int64)),
            "account_id": pa.array([w[2] for w in windows], pa.string()),
            "currency": pa.array([w[3] for w in windows], pa.string()),
            "event_count": pa.array(np.zeros(count, dtype=np.int64)),
            "amount_total": from_micros(np.zeros(count, dtype=np.int64)),
            "status": pa.array(["open"] * count, pa.string()),
            "updated_batch_id": pa.array(np.zeros(count, dtype=np.int64)),
            "updated_ingest_time": pa.nulls(count, UTC_MICROS),
            "_delete": pa.array(np.ones(count, dtype=bool)),
        }
    ).cast(WINDOW_CHANGE_SCHEMA)


def _session_history_table(records: list[tuple], events: pa.Table, advances: Advances) -> pa.Table:
    """``(version, change, status, line, row)`` records as ``HISTORY_SCHEMA`` rows; ``row`` is
    the event's row for an update, the advance's index for a final row."""
    at_line = dict(zip(events["_line"].to_pylist(), range(events.num_rows)))
    records = sorted(records, key=lambda r: (r[0].window, r[3], r[1] == "final"))
    count = len(records)
    event_rows = [r[4] if r[1] == "update" else at_line.get(r[3]) if r[1] == "delete" else None for r in records]
    present = [i for i in event_rows if i is not None]
    picked = events.take(pa.array(present, pa.int64())) if present else events.slice(0, 0)
    position = {row: n for n, row in enumerate(present)}
    column = lambda name: pa.array(
        [
            picked[name][position[i]].as_py() if (i is not None and r[1] == "update") else None
            for i, r in zip(event_rows, records)
        ],
        picked.schema.field(name).type,
    )
    processing, batch = [], []
    for r, i in zip(records, event_rows):
        if r[1] == "final":
            processing.append(int(advances.processing_time[r[4]]))
            batch.append(int(advances.batch_id[r[4]]))
        else:
            processing.append(int(events["_p"][i].as_py()))
            batch.append(int(events["batch_id"][i].as_py()))
    deleted = [r[1] == "delete" for r in records]
    marks = [int(events["_w"][i].as_py()) if r[1] == "update" else NO_TIME for r, i in zip(records, event_rows)]
    return pa.table(
        {
            "window_start": _timestamps(np.array([r[0].start for r in records], dtype=np.int64)),
            "window_end": _timestamps(np.array([r[0].end for r in records], dtype=np.int64)),
            "account_id": pa.array([r[0].key[0] for r in records], pa.string()),
            "currency": pa.array([r[0].key[1] for r in records], pa.string()),
            "event_count": pa.array([0 if d else r[0].count for r, d in zip(records, deleted)], pa.int64()),
            "amount_total": from_micros(
                np.array([0 if d else r[0].micros for r, d in zip(records, deleted)], dtype=object)
            ),
            "status": pa.array([r[2] for r in records], pa.string()),
            "change": pa.array([r[1] for r in records], pa.string()),
            "late_update": pa.array([False] * count, pa.bool_()),
            "processing_time": _timestamps(np.array(processing, dtype=np.int64)),
            "segment": column("segment"),
            "line_number": column("line_number"),
            "event_id": column("event_id"),
            "event_time": column("event_time"),
            "ingest_time": column("ingest_time"),
            "amount": column("amount"),
            "watermark": _timestamps(np.array(marks, dtype=np.int64)),
            "batch_id": pa.array(batch, pa.int64()),
        }
    ).cast(HISTORY_SCHEMA)

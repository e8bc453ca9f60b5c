"""One micro-batch of the speed layer, in Arrow (no I/O).

Spark's ``withWatermark`` would drop late rows; this step keeps every line instead. Its state is
the set of remembered first copies (``STATE_SCHEMA``): events whose windows can still change
(``in_window_state``) and events kept only so that a later copy is recognised as a duplicate
(within ``dedup_horizon`` of the watermark). Given the parsed lines of batch ``b``
(``parse_events`` output, as Arrow), that state and the largest event time of the batches
before ``b``, ``speed_step`` says where each line goes:

* ``dead_letters``: lines that fail validation;
* ``duplicates``: later copies of a remembered or earlier-in-batch ``event_id`` (dedup comes
  before lateness: a resent late event is a duplicate, not a second late event);
* ``late_events``: the side output, one row per (event, window) the watermark had closed;
* on-time events, which change their windows: ``window_changes`` holds the rows to merge into
  ``speed_aggregates`` (``Tables.upsert``): recomputed windows, status-only rows for windows the
  new watermark made final, and ``_delete`` rows for sessions that merged away.

Sessions merge: an event that overlaps a session still in state joins it even if its own
would-be session ``[t, t + gap)`` has closed; otherwise it is late when that one has.

It uses the rules of ``shared.dedup``, ``shared.windows``, ``shared.aggregation`` and
``shared.watermark``, which the batch path runs over the whole log through Spark.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from shared.aggregation import AGGREGATE_ARROW_SCHEMA, AGGREGATE_COLUMNS, AMOUNT_TOTAL_ARROW_TYPE, WINDOW_KEY, aggregate_windows_table
from shared.dedup import mark_duplicates_table
from shared.events import DEAD_LETTER_COLUMNS, EVENT_COLUMNS, EVENT_SCHEMA, UTC_MICROS
from shared.watermark import LATENESS_TYPE, is_final, is_late, is_late_update, lateness_seconds, watermark_after, window_status
from shared.windows import KEY_COLUMNS, SessionWindows, WindowSpec, assign_windows_table, last_window_end, micros

__all__ = [
    "SpeedSettings",
    "SpeedBatch",
    "STATE_SCHEMA",
    "STATE_COLUMNS",
    "DEAD_LETTER_SCHEMA",
    "DUPLICATE_SCHEMA",
    "LATE_SCHEMA",
    "WINDOW_CHANGE_SCHEMA",
    "speed_step",
    "empty_state",
]

_BATCH = pa.field("batch_id", pa.int64(), nullable=False)
STATE_SCHEMA = pa.schema([*EVENT_SCHEMA, pa.field("in_window_state", pa.bool_(), nullable=False), pa.field("batch_id", pa.int64())])
STATE_COLUMNS = tuple(STATE_SCHEMA.names)
DEAD_LETTER_SCHEMA = pa.schema(
    [*[pa.field(name, pa.int64() if name in ("segment", "line_number") else pa.string()) for name in DEAD_LETTER_COLUMNS], _BATCH]
)
DUPLICATE_SCHEMA = pa.schema(
    [
        *EVENT_SCHEMA,
        pa.field("first_segment", pa.int64()),
        pa.field("first_line_number", pa.int64()),
        pa.field("payload_conflict", pa.bool_()),
        _BATCH,
    ]
)
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
WINDOW_CHANGE_SCHEMA = pa.schema(
    [
        *AGGREGATE_ARROW_SCHEMA,
        pa.field("status", pa.string(), nullable=False),
        pa.field("updated_batch_id", pa.int64(), nullable=False),
        pa.field("updated_ingest_time", UTC_MICROS),
        pa.field("_delete", pa.bool_()),
        pa.field("_partial", pa.bool_()),
    ]
)


@dataclass(frozen=True)
class SpeedSettings:
    window: WindowSpec
    watermark_delay: int
    allowed_lateness: int
    dedup_horizon: int


@dataclass(frozen=True)
class SpeedBatch:
    """Where the lines of one micro-batch went, and the state after it.

    Watermarks and ``max_event_time`` (the running maximum after the batch) are microseconds.
    ``event_outcomes``: one row per first copy (``amount, currency, late, late_updates``):
    ``late`` when none of its windows took it, ``late_updates`` the windows it updated within
    the allowed lateness.
    """

    watermark: int | None
    next_watermark: int | None
    max_event_time: int | None
    dead_letters: pa.Table
    duplicates: pa.Table
    late_events: pa.Table
    event_outcomes: pa.Table
    window_changes: pa.Table
    state: pa.Table


def empty_state() -> pa.Table:
    return STATE_SCHEMA.empty_table()


def _with(table: pa.Table, **columns) -> pa.Table:
    for name, values in columns.items():
        table = table.append_column(name, values if isinstance(values, (pa.Array, pa.ChunkedArray)) else pa.array(values))
    return table


def _constant(value, count: int, kind: pa.DataType) -> pa.Array:
    return pa.array([value] * count, kind)


def _windows_without(table: pa.Table, keys: pa.Table) -> pa.Table:
    """Rows of ``table`` whose window key is not in ``keys``."""
    return table.join(keys.select(list(WINDOW_KEY)), list(WINDOW_KEY), join_type="left anti")


def _classify(fresh: pa.Table, pool: pa.Table, settings: SpeedSettings, watermark: int | None) -> pa.Table:
    """(event, window) rows of the fresh events (with ``_event``, the event's row) and the
    ``_late`` and ``_late_update`` flags."""
    spec, lateness = settings.window, settings.allowed_lateness
    if not isinstance(spec, SessionWindows):
        windows = assign_windows_table(spec, fresh)
        ends = micros(windows["window_end"])
        return _with(windows, _late=is_late(ends, watermark, lateness), _late_update=is_late_update(ends, watermark, lateness))
    times = micros(fresh["event_time"])
    sessions = assign_windows_table(spec, pool).select([*KEY_COLUMNS, "window_start", "window_end"])
    candidates = fresh.select([*KEY_COLUMNS, "_event"]).append_column("_t", pa.array(times)).join(
        _with(sessions.select(list(KEY_COLUMNS)), _s=micros(sessions["window_start"]), _e=micros(sessions["window_end"])),
        list(KEY_COLUMNS),
        join_type="inner",
    )
    t, start, end = (candidates[c].to_numpy() for c in ("_t", "_s", "_e"))
    merging = candidates["_event"].to_numpy()[(t < end) & (t + spec.gap > start)]
    merges = np.isin(np.arange(fresh.num_rows), merging)
    kind = fresh.schema.field("event_time").type
    return _with(
        fresh,
        window_start=fresh["event_time"],
        window_end=pa.array(times + spec.gap).cast(kind),
        _late=~merges & is_late(times + spec.gap, watermark, lateness),
        _late_update=np.zeros(fresh.num_rows, dtype=bool),
    )


def _window_changes(
    on_time: pa.Table, pool: pa.Table, spec: WindowSpec, watermark: int | None, next_watermark: int | None, batch_id: int
) -> pa.Table:
    """Rows to merge into ``speed_aggregates`` (``WINDOW_CHANGE_SCHEMA``)."""
    columns = [*EVENT_COLUMNS, "_fresh"]
    before = _with(pool, _fresh=np.zeros(pool.num_rows, dtype=bool))
    arrived = _with(on_time.select(list(EVENT_COLUMNS) + ["window_start", "window_end"]), _fresh=np.ones(on_time.num_rows, dtype=bool))
    if isinstance(spec, SessionWindows):
        every = assign_windows_table(spec, pa.concat_tables([before, arrived.select(columns)]))
    else:
        every = pa.concat_tables([assign_windows_table(spec, before), arrived.select([*columns, "window_start", "window_end"])])
    totals = aggregate_windows_table(every)
    changed = every.filter(every["_fresh"]).group_by(list(WINDOW_KEY), use_threads=False).aggregate([("ingest_time", "max")])
    upserts = totals.join(changed, list(WINDOW_KEY), join_type="inner").rename_columns(
        {"ingest_time_max": "updated_ingest_time"}
    )
    ends = micros(totals["window_end"])
    closing = is_final(ends, next_watermark) & ~is_final(ends, watermark)
    finals = _windows_without(totals.filter(pa.array(closing)), changed)
    parts = [
        _change_rows(upserts, next_watermark, batch_id, upserts["updated_ingest_time"], partial=False),
        _change_rows(finals, next_watermark, batch_id, pa.nulls(finals.num_rows, UTC_MICROS), partial=True),
    ]
    if isinstance(spec, SessionWindows):
        old = assign_windows_table(spec, pool).select(list(WINDOW_KEY)).group_by(list(WINDOW_KEY)).aggregate([])
        gone = _windows_without(old, totals)
        gone = _with(gone, event_count=pa.array(np.zeros(gone.num_rows, dtype=np.int64)), amount_total=pa.nulls(gone.num_rows, AMOUNT_TOTAL_ARROW_TYPE))
        parts.append(_change_rows(gone, next_watermark, batch_id, pa.nulls(gone.num_rows, UTC_MICROS), partial=False, delete=True))
    return pa.concat_tables(parts)


def _change_rows(totals: pa.Table, next_watermark, batch_id, ingest, *, partial: bool, delete: bool = False) -> pa.Table:
    count = totals.num_rows
    rows = _with(
        totals.select(list(AGGREGATE_COLUMNS)),
        status=window_status(micros(totals["window_end"]), next_watermark),
        updated_batch_id=_constant(batch_id, count, pa.int64()),
        updated_ingest_time=ingest,
        _delete=_constant(delete, count, pa.bool_()),
        _partial=_constant(partial, count, pa.bool_()),
    )
    return rows.cast(WINDOW_CHANGE_SCHEMA)


def _retained(state: pa.Table, settings: SpeedSettings, next_watermark: int | None) -> pa.Table:
    """State after the batch: drop windows that can no longer change, ids past the horizon."""
    if next_watermark is None:
        return state
    spec, limit = settings.window, next_watermark - settings.allowed_lateness
    in_window = state["in_window_state"].to_numpy(zero_copy_only=False)
    if isinstance(spec, SessionWindows):
        held = _with(state.filter(pa.array(in_window)), _row=np.flatnonzero(in_window))
        sessions = assign_windows_table(spec, held)
        alive = np.zeros(state.num_rows, dtype=bool)
        alive[sessions["_row"].to_numpy()] = micros(sessions["window_end"]) > limit
    else:
        alive = in_window & (last_window_end(spec, micros(state["event_time"])) > limit)
    remembered = micros(state["event_time"]) >= next_watermark - settings.dedup_horizon
    kept = state.set_column(state.schema.get_field_index("in_window_state"), "in_window_state", pa.array(alive))
    return kept.filter(pa.array(alive | remembered))


def _deduplicated(valid: pa.Table, state: pa.Table, batch_id: int) -> tuple[pa.Table, pa.Table]:
    """The batch's first copies, and its duplicates (of a remembered or an earlier line)."""
    known = state.select(list(EVENT_COLUMNS)).cast(EVENT_SCHEMA)
    everything = pa.concat_tables(
        [_with(known, _new=np.zeros(known.num_rows, dtype=bool)), _with(valid, _new=np.ones(valid.num_rows, dtype=bool))]
    )
    marked = mark_duplicates_table(everything)
    marked = marked.filter(marked["_new"])
    is_copy = marked["is_duplicate"]
    duplicates = marked.filter(is_copy).select(list(DUPLICATE_SCHEMA.names[:-1]))
    duplicates = _with(duplicates, batch_id=_constant(batch_id, duplicates.num_rows, pa.int64())).cast(DUPLICATE_SCHEMA)
    return marked.filter(pc.invert(is_copy)).select(list(EVENT_COLUMNS)), duplicates


def speed_step(parsed: pa.Table, state: pa.Table, settings: SpeedSettings, batch_id: int, max_event_before: int | None) -> SpeedBatch:
    """Where every line of micro-batch ``batch_id`` goes (``parsed``: ``parse_events`` rows)."""
    rejected = pc.is_valid(parsed["reject_reason"])
    valid = parsed.filter(pc.invert(pc.or_(rejected, parsed["heartbeat"]))).select(list(EVENT_COLUMNS)).cast(EVENT_SCHEMA)
    dead_letters = parsed.filter(rejected).select(list(DEAD_LETTER_SCHEMA.names[:-1]))
    dead_letters = _with(dead_letters, batch_id=_constant(batch_id, dead_letters.num_rows, pa.int64())).cast(DEAD_LETTER_SCHEMA)
    batch_max = int(micros(valid["event_time"]).max()) if valid.num_rows else None
    seen = [m for m in (max_event_before, batch_max) if m is not None]
    max_event = max(seen) if seen else None
    watermark = watermark_after(max_event_before, settings.watermark_delay)
    next_watermark = watermark_after(max_event, settings.watermark_delay)

    fresh, duplicates = _deduplicated(valid, state, batch_id)
    pool = state.filter(state["in_window_state"]).select(list(EVENT_COLUMNS))
    windows = _classify(_with(fresh, _event=np.arange(fresh.num_rows)), pool, settings, watermark)
    late_flags = windows["_late"].to_numpy(zero_copy_only=False)
    late = windows.filter(pa.array(late_flags))
    late_events = _with(
        late.select(list(EVENT_COLUMNS) + ["window_start", "window_end"]),
        watermark=_constant(watermark, late.num_rows, pa.int64()).cast(UTC_MICROS),
        lateness_seconds=lateness_seconds(micros(late["event_time"]), watermark),
        batch_id=_constant(batch_id, late.num_rows, pa.int64()),
    ).cast(LATE_SCHEMA)

    event = windows["_event"].to_numpy()
    windows_of_event = np.bincount(event, minlength=fresh.num_rows)
    all_late = np.bincount(event, weights=late_flags, minlength=fresh.num_rows) == windows_of_event
    late_updates = np.bincount(event, weights=windows["_late_update"].to_numpy(zero_copy_only=False), minlength=fresh.num_rows)
    outcomes = _with(fresh.select(["event_id", "amount", "currency"]), late=all_late, late_updates=late_updates.astype(np.int64))

    on_time = windows.filter(pa.array(~late_flags))
    changes = _window_changes(on_time, pool, settings.window, watermark, next_watermark, batch_id)
    arrivals = _with(fresh, in_window_state=~all_late, batch_id=_constant(batch_id, fresh.num_rows, pa.int64()))
    remembered = pa.concat_tables([state.cast(STATE_SCHEMA), arrivals.cast(STATE_SCHEMA)])
    return SpeedBatch(
        watermark=watermark,
        next_watermark=next_watermark,
        max_event_time=max_event,
        dead_letters=dead_letters,
        duplicates=duplicates,
        late_events=late_events,
        event_outcomes=outcomes,
        window_changes=changes,
        state=_retained(remembered, settings, next_watermark),
    )

"""One micro-batch of the ``unique_visitors`` stream, in Arrow (no I/O): where every line goes.

Given the parsed lines of a micro-batch (``lklab.pipelines.unique_visitors.parse.PARSED_SCHEMA``) and the
``VisitorState`` left by the batch before, ``visitors_step``

1. runs the log's clock over the lines (``shared.clock.advance``): each line's processing time
   ``p``, the watermark ``W`` it is judged by and ``W*`` after it;
2. deduplicates the views against the first copies remembered (``shared.dedup``, with the
   page-view payload; dedup comes before lateness);
3. judges every (view, window) pair against its line's ``W`` (``shared.watermark``): *late*
   when ``W >= window_end + allowed_lateness`` (the side output), otherwise *on time*; an
   on-time pair is a **new URL** when it is the first view of its (window, user, URL) after
   the held entries (``lklab.pipelines.unique_visitors.rule.first_views``: the count goes up by one), else a
   **repeat** (the count stays; the entry's ``last_seen`` moves on);
4. drops the entries that expired (``lklab.pipelines.unique_visitors.state``: window released and state TTL
   passed) and serves every window whose count or status changed.

**Late views and the non-additive count.** A late pair never changes a served count: the
window's count is final, and adding one would be wrong whenever the URL is already a member.
The side output says what the view would do: ``adds_url`` is False when the state holds an
entry for its (window, user, URL) that is not expired at the view's ``p`` and ``W`` (the URL
was counted: the corrected count is unchanged), True when it holds none (the corrected count
gains one, once however many late views carry the URL). Entries stay ``state_ttl`` after their
window's last on-time view of the URL, so beyond the TTL a counted URL reads as new: the flag
may then overstate, which reconciliation, which reads the ``members`` output and not the
state, corrects (``lklab.pipelines.unique_visitors.reconcile_rule``).

Every decision reads only the line, its own ``p``, ``W`` and the state, and ``W``/``p`` only
grow, so the rows served (the last row of each window, batch ids aside), the members, the late
side output and the duplicates are the same whatever micro-batches the log is cut into.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lklab.pipelines.unique_visitors.parse import PAGE_VIEW_COLUMNS, PAGE_VIEW_SCHEMA, PAYLOAD_COLUMNS
from lklab.pipelines.unique_visitors.rule import (
    MEMBER_KEY,
    WINDOW_KEY,
    first_views,
    require_fixed,
    view_pairs,
)
from lklab.pipelines.unique_visitors.state import ENTRY_SCHEMA, REMEMBERED_SCHEMA, VisitorState, expired
from shared.clock import NO_TIME, ClockSettings, advance, line_keys
from shared.dedup import deduplicate_stream, remembered_from, still_remembered
from shared.events import UTC_MICROS
from shared.micro_batch import MicroBatch, duplicate_schema
from shared.speed import DEAD_LETTER_SCHEMA, dead_letter_rows
from shared.watermark import LATENESS_TYPE, is_final, is_late, lateness_seconds
from shared.windows import WindowSpec, micros

__all__ = [
    "DEFAULT_STATE_TTL",
    "VisitorSettings",
    "VisitorBatch",
    "VISITOR_WINDOW_SCHEMA",
    "VISITOR_MEMBER_SCHEMA",
    "VISITOR_LATE_SCHEMA",
    "VISITOR_DUPLICATE_SCHEMA",
    "DEAD_LETTER_SCHEMA",
    "visitors_step",
]

DEFAULT_STATE_TTL = 24 * 3600 * 1_000_000
_BATCH = pa.field("batch_id", pa.int64(), nullable=False)
VISITOR_WINDOW_SCHEMA = pa.schema(
    [
        pa.field("window_start", UTC_MICROS),
        pa.field("window_end", UTC_MICROS),
        pa.field("user_id", pa.string()),
        pa.field("distinct_urls", pa.int64()),
        pa.field("status", pa.string()),  # open | final
        pa.field("updated_batch_id", pa.int64()),
        pa.field("updated_processing_time", UTC_MICROS),  # p of the view that added the last URL
    ]
)
# The stream's members: one row per URL a window counted, with the view that added it.
VISITOR_MEMBER_SCHEMA = pa.schema([*[f for f in ENTRY_SCHEMA if f.name not in ("added_batch_id", "last_seen")], _BATCH])
VISITOR_LATE_SCHEMA = pa.schema(
    [
        *PAGE_VIEW_SCHEMA,
        pa.field("window_start", UTC_MICROS),
        pa.field("window_end", UTC_MICROS),
        pa.field("watermark", UTC_MICROS),
        pa.field("lateness_seconds", LATENESS_TYPE),
        pa.field("adds_url", pa.bool_()),
        _BATCH,
    ]
)
VISITOR_DUPLICATE_SCHEMA = duplicate_schema(PAGE_VIEW_SCHEMA)


@dataclass(frozen=True)
class VisitorSettings:
    """The stream's settings; durations in microseconds. ``window``: tumbling or sliding."""

    window: WindowSpec
    watermark_delay: int
    allowed_lateness: int
    dedup_horizon: int
    state_ttl: int = DEFAULT_STATE_TTL
    watermark_interval: int = 1_000_000

    def __post_init__(self) -> None:
        require_fixed(self.window)
        if self.state_ttl < 0:
            raise ValueError("state-ttl must not be negative (0: entries leave with their window)")

    @property
    def clock(self) -> ClockSettings:
        return ClockSettings(self.watermark_delay, self.watermark_interval)


@dataclass(frozen=True)
class VisitorBatch(MicroBatch[VisitorState]):
    """Where the lines of one micro-batch went (``MicroBatch``), and the state after it.

    ``windows``: one row per window whose count or status changed (``VISITOR_WINDOW_SCHEMA``);
    ``members``: the URLs added (``VISITOR_MEMBER_SCHEMA``); ``late``: the side output, one row
    per late pair; ``outcomes``: per first copy, its ``pairs``, ``new_urls``, ``repeats`` and
    ``late_pairs`` (they add up)."""

    late: pa.Table
    members: pa.Table
    windows: pa.Table
    outcomes: pa.Table

    @property
    def state_entries(self) -> int:
        """Member entries in the state after the batch (the figure the TTL drives)."""
        return self.state.entries


def _micros_or_none(column) -> np.ndarray:
    return column.cast(pa.int64()).fill_null(NO_TIME).to_numpy(zero_copy_only=False)


def _timestamps(values: np.ndarray) -> pa.Array:
    values = np.asarray(values, dtype=np.int64)
    return pa.array(values, pa.int64(), mask=values == NO_TIME).cast(UTC_MICROS)


def _optional(value: int) -> int | None:
    return None if value == NO_TIME else int(value)


def visitors_step(parsed: pa.Table, state: VisitorState, settings: VisitorSettings, batch_id: int) -> VisitorBatch:
    """Where every line of micro-batch ``batch_id`` goes (``parsed``: ``PARSED_SCHEMA`` rows)."""
    parsed = parsed.take(pc.sort_indices(parsed, sort_keys=[("segment", "ascending"), ("line_number", "ascending")]))
    count = parsed.num_rows
    batch_ids = np.full(count, batch_id, dtype=np.int64)
    keys = line_keys(parsed["segment"].to_numpy(), parsed["line_number"].to_numpy())
    is_view = pc.and_(pc.is_null(parsed["reject_reason"]), pc.invert(parsed["heartbeat"]))
    view_flags = is_view.to_numpy(zero_copy_only=False) if count else np.zeros(0, dtype=bool)
    times = np.where(view_flags, _micros_or_none(parsed["event_time"]), NO_TIME)
    run = advance(state.clock, settings.clock, keys, _micros_or_none(parsed["ingest_time"]), times)
    views = parsed.filter(is_view).select(list(PAGE_VIEW_COLUMNS)).cast(PAGE_VIEW_SCHEMA)
    for name, values in (("_line", keys), ("_p", run.processing_time), ("_w", run.watermark), ("batch_id", batch_ids)):
        views = views.append_column(name, pa.array(np.asarray(values, dtype=np.int64)[view_flags], pa.int64()))

    dedup = deduplicate_stream(views, state.remembered, settings.dedup_horizon, PAYLOAD_COLUMNS)
    firsts = dedup.firsts.append_column("_view", pa.array(np.arange(dedup.firsts.num_rows, dtype=np.int64)))
    pairs = view_pairs(settings.window, firsts)
    marks, ends = pairs["_w"].to_numpy(), micros(pairs["window_end"])
    late_flags = is_late(ends, marks, settings.allowed_lateness)
    on_time = pairs.filter(pa.array(~late_flags))

    before_after = state.clock.watermark_after(settings.clock)
    after = _optional(run.watermark_after[-1]) if count else before_after
    new_flags, entries = _count(state.members, on_time, batch_id)
    late = pairs.filter(pa.array(late_flags))
    adds = _adds_url(entries, late, settings)
    p_after = run.state.processing_time
    kept = entries.filter(pa.array(~expired(entries, after, p_after, settings.allowed_lateness, settings.state_ttl)))
    remembered = pa.concat_tables([state.remembered, _remembered_rows(dedup.firsts)])
    return VisitorBatch(
        input_lines=count,
        heartbeats=int(pc.sum(parsed["heartbeat"]).as_py() or 0) if count else 0,
        watermark=_optional(run.watermark[0]) if count else before_after,
        next_watermark=after,
        dead_letters=dead_letter_rows(parsed, batch_ids),
        duplicates=dedup.duplicates.select(VISITOR_DUPLICATE_SCHEMA.names).cast(VISITOR_DUPLICATE_SCHEMA),
        late=_late_rows(late, adds),
        members=_member_rows(on_time.filter(pa.array(new_flags))),
        windows=_window_changes(entries, on_time.filter(pa.array(new_flags)), before_after, after),
        outcomes=_outcomes(firsts, pairs["_view"].to_numpy(), late_flags, new_flags, ~late_flags),
        state=VisitorState(
            run.state, still_remembered(remembered, after, settings.dedup_horizon), kept.cast(ENTRY_SCHEMA)
        ),
    )


def _count(held: pa.Table, on_time: pa.Table, batch_id: int) -> tuple[np.ndarray, pa.Table]:
    """Which on-time pairs add a URL (first after the held entries), and the entries after them
    (``last_seen``: the latest ``p`` of an on-time view of the entry)."""
    both = pa.concat_tables([held.select(list(MEMBER_KEY)), on_time.select(list(MEMBER_KEY))])
    firsts = first_views(both)
    new_flags = firsts[held.num_rows :]
    added = on_time.filter(pa.array(new_flags))
    fresh = pa.table(
        {
            **{
                name: added[name]
                for name in ENTRY_SCHEMA.names
                if name in added.column_names and name not in ("last_seen",)
            },
            "added_at": _timestamps(added["_p"].to_numpy()),
            "added_batch_id": pa.array(np.full(added.num_rows, batch_id, dtype=np.int64)),
            "last_seen": _timestamps(added["_p"].to_numpy()),
        }
    )
    entries = pa.concat_tables([held, fresh.select(ENTRY_SCHEMA.names).cast(ENTRY_SCHEMA)])
    if not on_time.num_rows:
        return new_flags, entries
    seen = on_time.group_by(list(MEMBER_KEY), use_threads=False).aggregate([("_p", "max")])
    joined = entries.join(seen, list(MEMBER_KEY), join_type="left outer")
    last = np.maximum(micros(joined["last_seen"]), joined["_p_max"].fill_null(NO_TIME).to_numpy(zero_copy_only=False))
    joined = joined.set_column(joined.schema.get_field_index("last_seen"), "last_seen", _timestamps(last))
    return new_flags, joined.select(ENTRY_SCHEMA.names).cast(ENTRY_SCHEMA)


def _adds_url(entries: pa.Table, late: pa.Table, settings: VisitorSettings) -> np.ndarray:
    """Per late pair: True unless an entry of its (window, user, URL) is there and not expired
    at the pair's own ``p`` and ``W``. Every on-time view of a window comes before its first late
    one (``W`` only grows), so the entries after the batch are what each late pair would see."""
    if not late.num_rows:
        return np.zeros(0, dtype=bool)
    numbered = late.select(list(MEMBER_KEY)).append_column("_pair", pa.array(np.arange(late.num_rows, dtype=np.int64)))
    found = numbered.join(entries.select([*MEMBER_KEY, "last_seen"]), list(MEMBER_KEY), join_type="inner")
    rows = found["_pair"].to_numpy()
    alive = ~expired(
        found, late["_w"].to_numpy()[rows], late["_p"].to_numpy()[rows], settings.allowed_lateness, settings.state_ttl
    )
    adds = np.ones(late.num_rows, dtype=bool)
    adds[rows[alive]] = False
    return adds


def _remembered_rows(firsts: pa.Table) -> pa.Table:
    since = remembered_from(micros(firsts["event_time"]), firsts["_w"].to_numpy())
    rows = firsts.select(list(PAGE_VIEW_COLUMNS)).append_column("remembered_from", _timestamps(since))
    return rows.cast(REMEMBERED_SCHEMA)


def _late_rows(late: pa.Table, adds: np.ndarray) -> pa.Table:
    marks = late["_w"].to_numpy()
    rows = late.select([*PAGE_VIEW_COLUMNS, "window_start", "window_end"])
    for name, values in (
        ("watermark", _timestamps(marks)),
        ("lateness_seconds", lateness_seconds(micros(late["event_time"]), marks)),
        ("adds_url", pa.array(adds, pa.bool_())),
        ("batch_id", late["batch_id"]),
    ):
        rows = rows.append_column(name, values)
    return rows.cast(VISITOR_LATE_SCHEMA)


def _member_rows(added: pa.Table) -> pa.Table:
    rows = added.select([name for name in VISITOR_MEMBER_SCHEMA.names if name not in ("added_at",)])
    rows = rows.append_column("added_at", _timestamps(added["_p"].to_numpy()))
    return rows.select(VISITOR_MEMBER_SCHEMA.names).cast(VISITOR_MEMBER_SCHEMA)


def _window_changes(entries: pa.Table, added: pa.Table, before: int | None, after: int | None) -> pa.Table:
    """The windows that added a URL (``added``: the new-URL pairs), or that the watermark made
    final (open before, final after); a repeat changes no row."""
    windows = entries.group_by(list(WINDOW_KEY), use_threads=False).aggregate(
        [("url", "count"), ("added_batch_id", "max"), ("added_at", "max")]
    )
    ends = micros(windows["window_end"])
    final_now = is_final(ends, after)
    touched = np.zeros(windows.num_rows, dtype=bool)
    if added.num_rows:
        marks = (
            pa.table({name: added[name] for name in WINDOW_KEY})
            .group_by(list(WINDOW_KEY), use_threads=False)
            .aggregate([])
        )
        marks = marks.append_column("_touched", pa.array(np.ones(marks.num_rows, dtype=bool)))
        joined = windows.join(marks, list(WINDOW_KEY), join_type="left outer")
        windows, ends, final_now = joined, micros(joined["window_end"]), is_final(micros(joined["window_end"]), after)
        touched = joined["_touched"].fill_null(False).to_numpy(zero_copy_only=False)
    changed = touched | (~is_final(ends, before) & final_now)
    rows = pa.table(
        {
            **{name: windows[name] for name in WINDOW_KEY},
            "distinct_urls": windows["url_count"],
            "status": pa.array(np.where(final_now, "final", "open"), pa.string()),
            "updated_batch_id": windows["added_batch_id_max"],
            "updated_processing_time": windows["added_at_max"],
        }
    ).filter(pa.array(changed))
    return rows.cast(VISITOR_WINDOW_SCHEMA).sort_by([(name, "ascending") for name in WINDOW_KEY])


def _outcomes(
    firsts: pa.Table, view: np.ndarray, late_flags: np.ndarray, new_flags: np.ndarray, on_time_flags: np.ndarray
) -> pa.Table:
    size = firsts.num_rows
    new_per_pair = np.zeros(len(view), dtype=bool)
    new_per_pair[np.flatnonzero(on_time_flags)[new_flags]] = True
    count = lambda flags: np.bincount(view, weights=flags, minlength=size).astype(np.int64)
    pairs = np.bincount(view, minlength=size).astype(np.int64)
    return pa.table(
        {
            "segment": firsts["segment"],
            "line_number": firsts["line_number"],
            "event_id": firsts["event_id"],
            "pairs": pa.array(pairs),
            "new_urls": pa.array(count(new_per_pair)),
            "repeats": pa.array(count(on_time_flags & ~new_per_pair)),
            "late_pairs": pa.array(count(late_flags)),
        }
    )

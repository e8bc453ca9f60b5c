"""What the ``unique_visitors`` stream carries between micro-batches, and the state TTL.

* ``clock``: the log clock after the last line read (``shared.clock.ClockState``);
* ``remembered``: first copies a later copy can still be recognised against (``shared.dedup``,
  ``REMEMBERED_SCHEMA`` here: the page view plus ``remembered_from``);
* ``members``: one *entry* per ``(window_start, window_end, user_id, url)`` the stream counted
  (``ENTRY_SCHEMA``): the view that added it (``event_id``, ``segment``, ``line_number``,
  ``added_at``, ``added_batch_id``) and ``last_seen``, the processing time of the latest on-time
  view of that URL in that window.

**The state TTL.** An entry is *held* while its window can still take on-time views
(``W < window_end + allowed_lateness``, ``shared.watermark``): a held window's entries are all
there, so its count is ``|entries|``. Once released, an entry stays for the state TTL on the
log's clock (processing time, ``shared.clock``): it leaves the state once the processing time
``p`` reaches ``last_seen + state_ttl`` (``expired``). Both ``W`` and ``p`` only grow, so an
entry once expired stays expired: when a step drops it changes nothing a later line decides.

The entries within the TTL are the user's **seen set** (``seen_set``: the URLs counted for the
user in the last ``state_ttl`` of processing time, 24 h by default, and those of windows still
held); they also tell a late view of a URL the window already counted from one of a new URL
(``lklab.pipelines.unique_visitors.step``). The stream writes the set after each micro-batch, expired entries
gone, to ``visitors_seen`` (``seen_table``: one row per user and URL, with its latest
``last_seen`` and ``as_of``, the processing time the set stands at). What is served never
depends on the TTL: counts change only in held windows. The state grows with the TTL: about
``state_ttl x`` the rate of new (window, user, URL) entries (``entries``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from lklab.pipelines.unique_visitors.parse import PAGE_VIEW_SCHEMA
from shared.clock import NO_TIME, ClockState
from shared.events import UTC_MICROS
from shared.stream_state import parts_schema, parts_table, table_parts
from shared.windows import micros

__all__ = [
    "REMEMBERED_SCHEMA",
    "ENTRY_SCHEMA",
    "SEEN_SCHEMA",
    "SEEN_TABLE_SCHEMA",
    "STATE_SCHEMA",
    "VisitorState",
    "expired",
    "seen_set",
    "seen_table",
    "state_table",
    "state_from_table",
]

REMEMBERED_SCHEMA = pa.schema([*PAGE_VIEW_SCHEMA, pa.field("remembered_from", UTC_MICROS)])
ENTRY_SCHEMA = pa.schema(
    [
        pa.field("window_start", UTC_MICROS),
        pa.field("window_end", UTC_MICROS),
        *(PAGE_VIEW_SCHEMA.field(name) for name in ("user_id", "url", "event_id", "segment", "line_number")),
        pa.field("added_at", UTC_MICROS),
        pa.field("added_batch_id", pa.int64()),
        pa.field("last_seen", UTC_MICROS),
    ]
)
SEEN_SCHEMA = pa.schema(
    [pa.field("user_id", pa.string()), pa.field("url", pa.string()), pa.field("last_seen", UTC_MICROS)]
)
# ``visitors_seen``: the seen set as of micro-batch ``batch_id``, ``as_of`` the processing time after it.
SEEN_TABLE_SCHEMA = pa.schema(
    [*SEEN_SCHEMA, pa.field("as_of", UTC_MICROS), pa.field("batch_id", pa.int64(), nullable=False)]
)
STATE_SCHEMA = parts_schema("kind", REMEMBERED_SCHEMA, ENTRY_SCHEMA)  # kind: clock | remembered | member


@dataclass(frozen=True)
class VisitorState:
    clock: ClockState
    remembered: pa.Table
    members: pa.Table

    @classmethod
    def empty(cls) -> VisitorState:
        return cls(ClockState(), REMEMBERED_SCHEMA.empty_table(), ENTRY_SCHEMA.empty_table())

    @property
    def entries(self) -> int:
        """Member entries held (within their window or the TTL)."""
        return self.members.num_rows

    @property
    def rows(self) -> int:
        """Entries plus remembered first copies: the size the state grows with."""
        return self.members.num_rows + self.remembered.num_rows


def expired(members: pa.Table, watermark, processing_time, allowed_lateness: int, state_ttl: int) -> np.ndarray:
    """Per entry: True once its window is released (``watermark >= window_end +
    allowed_lateness``) and ``processing_time >= last_seen + state_ttl``. ``watermark`` and
    ``processing_time`` (microseconds, ``NO_TIME``/None: unknown, nothing expires) are a scalar
    or one per entry."""
    count = members.num_rows
    marks = np.broadcast_to(np.asarray(NO_TIME if watermark is None else watermark, dtype=np.int64), (count,))
    moments = np.broadcast_to(
        np.asarray(NO_TIME if processing_time is None else processing_time, dtype=np.int64), (count,)
    )
    released = (marks != NO_TIME) & (marks >= micros(members["window_end"]) + allowed_lateness)
    return released & (moments != NO_TIME) & (moments >= micros(members["last_seen"]) + state_ttl)


def seen_set(state: VisitorState) -> pa.Table:
    """Per user, the URLs of the entries in the state, each with its latest ``last_seen``:
    ``SEEN_SCHEMA``, sorted."""
    grouped = state.members.group_by(["user_id", "url"], use_threads=False).aggregate([("last_seen", "max")])
    table = pa.table({"user_id": grouped["user_id"], "url": grouped["url"], "last_seen": grouped["last_seen_max"]})
    return table.cast(SEEN_SCHEMA).sort_by([("user_id", "ascending"), ("url", "ascending")])


def seen_table(state: VisitorState, batch_id: int) -> pa.Table:
    """``seen_set`` as the rows of ``visitors_seen`` after micro-batch ``batch_id``
    (``SEEN_TABLE_SCHEMA``): ``as_of`` is the state's processing time, the same on every row."""
    seen = seen_set(state)
    as_of = pa.array([state.clock.processing_time] * seen.num_rows, pa.int64()).cast(UTC_MICROS)
    return (
        seen.append_column("as_of", as_of)
        .append_column("batch_id", pa.array([batch_id] * seen.num_rows, pa.int64()))
        .cast(SEEN_TABLE_SCHEMA)
    )


def state_table(state: VisitorState) -> pa.Table:
    """The state as one table (``visitors_state``: one row per clock, remembered copy or entry)."""
    return parts_table(STATE_SCHEMA, state.clock, {"remembered": state.remembered, "member": state.members})


def state_from_table(table: pa.Table) -> VisitorState:
    clock, parts = table_parts(table, {"remembered": REMEMBERED_SCHEMA, "member": ENTRY_SCHEMA})
    return VisitorState(clock=clock, remembered=parts["remembered"], members=parts["member"])

"""What the stream carries from one micro-batch to the next, and its one-table form.

* ``clock``: the log clock after the last line read (``shared.clock.ClockState``);
* ``remembered``: first copies a later copy can still be recognised against
  (``REMEMBERED_SCHEMA``; within the dedup horizon of the watermark);
* ``windows``: windows that can still change (``WINDOW_ROW_SCHEMA``; the watermark has not passed
  their end plus the allowed lateness), with their totals and status.

Everything the stream decides is a function of this state and the lines that follow, so the
state is what makes a restarted stream, or one cut into other micro-batches, decide as an
uninterrupted one. It is committed as one Delta table (``stream_state``, one row per clock,
remembered copy or window, told apart by ``kind``) in one commit: the speed layer's commit point.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from shared.clock import ClockState
from shared.dedup import REMEMBERED_SCHEMA
from shared.stream_windows import WINDOW_ROW_SCHEMA, empty_held

__all__ = ["StreamState", "STATE_SCHEMA", "state_table", "state_from_table"]

_CLOCK_FIELDS = ("processing_time", "tick", "max_before_tick", "max_in_tick")
_SHARED = ("account_id", "currency")
STATE_SCHEMA = pa.schema(
    [
        pa.field("kind", pa.string(), nullable=False),  # clock | remembered | window
        *REMEMBERED_SCHEMA,
        *[field.with_nullable(True) for field in WINDOW_ROW_SCHEMA if field.name not in _SHARED],
        *[pa.field(name, pa.int64()) for name in _CLOCK_FIELDS],
    ]
)


@dataclass(frozen=True)
class StreamState:
    clock: ClockState
    remembered: pa.Table
    windows: pa.Table

    @classmethod
    def empty(cls) -> "StreamState":
        return cls(ClockState(), REMEMBERED_SCHEMA.empty_table(), empty_held())

    @property
    def rows(self) -> int:
        """Remembered copies plus windows held: the size the state grows with."""
        return self.remembered.num_rows + self.windows.num_rows


def _part(kind: str, table: pa.Table) -> pa.Table:
    columns = {"kind": pa.array([kind] * table.num_rows, pa.string())}
    for field in STATE_SCHEMA:
        if field.name != "kind":
            columns[field.name] = table[field.name] if field.name in table.column_names else pa.nulls(table.num_rows, field.type)
    return pa.table(columns).cast(STATE_SCHEMA)


def state_table(state: StreamState) -> pa.Table:
    clock = pa.table({name: pa.array([getattr(state.clock, name)], pa.int64()) for name in _CLOCK_FIELDS})
    return pa.concat_tables([_part("clock", clock), _part("remembered", state.remembered), _part("window", state.windows)])


def state_from_table(table: pa.Table) -> StreamState:
    def kind(name: str) -> pa.Table:
        return table.filter(pc.equal(table["kind"], name))

    clocks = kind("clock").to_pylist()
    clock = ClockState(**{name: clocks[0][name] for name in _CLOCK_FIELDS}) if clocks else ClockState()
    return StreamState(
        clock=clock,
        remembered=kind("remembered").select(REMEMBERED_SCHEMA.names).cast(REMEMBERED_SCHEMA),
        windows=kind("window").select(WINDOW_ROW_SCHEMA.names).cast(WINDOW_ROW_SCHEMA),
    )

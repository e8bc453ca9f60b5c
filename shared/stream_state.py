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

__all__ = [
    "StreamState",
    "STATE_SCHEMA",
    "CLOCK_FIELDS",
    "clock_table",
    "state_part",
    "parts_schema",
    "parts_table",
    "state_table",
    "state_from_table",
    "table_parts",
]

CLOCK_FIELDS = ("processing_time", "tick", "max_before_tick", "max_in_tick")


def parts_schema(column: str, *parts: pa.Schema) -> pa.Schema:
    """The schema of ``parts_table``: ``column`` (which part a row belongs to), every part's
    columns (a name the parts share once, where it first appears), nullable since a row fills
    only its own part's, then the clock's fields."""
    fields: dict[str, pa.Field] = {}
    for schema in parts:
        for field in schema:
            fields.setdefault(field.name, field.with_nullable(True))
    return pa.schema(
        [
            pa.field(column, pa.string(), nullable=False),
            *fields.values(),
            *[pa.field(name, pa.int64()) for name in CLOCK_FIELDS],
        ]
    )


STATE_SCHEMA = parts_schema("kind", REMEMBERED_SCHEMA, WINDOW_ROW_SCHEMA)  # kind: clock | remembered | window


@dataclass(frozen=True)
class StreamState:
    clock: ClockState
    remembered: pa.Table
    windows: pa.Table

    @classmethod
    def empty(cls) -> StreamState:
        return cls(ClockState(), REMEMBERED_SCHEMA.empty_table(), empty_held())

    @property
    def rows(self) -> int:
        """Remembered copies plus windows held: the size the state grows with."""
        return self.remembered.num_rows + self.windows.num_rows


def state_part(schema: pa.Schema, column: str, kind: str, table: pa.Table) -> pa.Table:
    """One part's rows (``kind``; the clock's: "clock") as rows of ``parts_table``'s ``schema``."""
    columns = {column: pa.array([kind] * table.num_rows, pa.string())}
    for field in schema:
        if field.name != column:
            columns[field.name] = (
                table[field.name] if field.name in table.column_names else pa.nulls(table.num_rows, field.type)
            )
    return pa.table(columns).cast(schema)


def clock_table(clock: ClockState) -> pa.Table:
    """The clock as a table of one row, its ``CLOCK_FIELDS``."""
    return pa.table({name: pa.array([getattr(clock, name)], pa.int64()) for name in CLOCK_FIELDS})


def parts_table(schema: pa.Schema, clock: ClockState, parts: dict[str, pa.Table], *, column: str = "kind") -> pa.Table:
    """A stream's state as one table of ``schema`` (a ``column`` naming each row's part, the
    clock's fields, and every part's columns): one ``clock`` row, then each part's rows, with the
    columns it lacks null. Every pipeline's state is stored this way."""
    return pa.concat_tables(
        [
            state_part(schema, column, "clock", clock_table(clock)),
            *(state_part(schema, column, kind, rows) for kind, rows in parts.items()),
        ]
    )


def table_parts(
    table: pa.Table, schemas: dict[str, pa.Schema], *, column: str = "kind"
) -> tuple[ClockState, dict[str, pa.Table]]:
    """``parts_table`` read back: the clock, and each part's rows with its own ``schemas[kind]``."""

    def kind(name: str) -> pa.Table:
        return table.filter(pc.equal(table[column], name))

    clocks = kind("clock").to_pylist()
    clock = ClockState(**{name: clocks[0][name] for name in CLOCK_FIELDS}) if clocks else ClockState()
    return clock, {name: kind(name).select(schema.names).cast(schema) for name, schema in schemas.items()}


def state_table(state: StreamState) -> pa.Table:
    return parts_table(STATE_SCHEMA, state.clock, {"remembered": state.remembered, "window": state.windows})


def state_from_table(table: pa.Table) -> StreamState:
    clock, parts = table_parts(table, {"remembered": REMEMBERED_SCHEMA, "window": WINDOW_ROW_SCHEMA})
    return StreamState(clock=clock, remembered=parts["remembered"], windows=parts["window"])

"""What the order-payment join carries from one micro-batch to the next, and its one-table form.

* ``clock``: the log clock after the last line read (``shared.clock.ClockState``);
* ``remembered``: first copies a later copy can still be recognised against
  (``REMEMBERED_SCHEMA``: the event and ``remembered_from``, see ``shared.dedup``);
* ``orders``: on-time orders whose match interval ``[order_time, order_time + bound]`` the
  watermark has not yet passed (``HELD_SCHEMA``; ``matched``: a payment has matched it already);
* ``payments``: on-time payments an on-time order can still arrive for: held while the watermark
  after a line is at most ``payment_time + bound`` (``HELD_SCHEMA``).

So the state holds each on-time order about ``bound + watermark_delay`` of event time and each
payment as long, plus the dedup horizon's first copies: its size grows with the event rate times
``bound + watermark_delay`` (``rows``), not with the log. It is committed as one table
(``payments_state``, one row per clock, remembered copy or held event, told apart by
``state_kind``).
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from shared.clock import ClockState
from shared.events import UTC_MICROS
from shared.order_events import ORDER_EVENT_SCHEMA

__all__ = ["REMEMBERED_SCHEMA", "HELD_SCHEMA", "JOIN_STATE_SCHEMA", "JoinState", "join_state_table", "join_state_from_table"]

REMEMBERED_SCHEMA = pa.schema([*ORDER_EVENT_SCHEMA, pa.field("remembered_from", UTC_MICROS)])
HELD_SCHEMA = pa.schema([*ORDER_EVENT_SCHEMA, pa.field("matched", pa.bool_())])
_CLOCK_FIELDS = ("processing_time", "tick", "max_before_tick", "max_in_tick")
JOIN_STATE_SCHEMA = pa.schema(
    [
        pa.field("state_kind", pa.string(), nullable=False),  # clock | remembered | order | payment
        *ORDER_EVENT_SCHEMA,
        pa.field("remembered_from", UTC_MICROS),
        pa.field("matched", pa.bool_()),
        *[pa.field(name, pa.int64()) for name in _CLOCK_FIELDS],
    ]
)


@dataclass(frozen=True)
class JoinState:
    clock: ClockState
    remembered: pa.Table
    orders: pa.Table
    payments: pa.Table

    @classmethod
    def empty(cls) -> "JoinState":
        return cls(ClockState(), REMEMBERED_SCHEMA.empty_table(), HELD_SCHEMA.empty_table(), HELD_SCHEMA.empty_table())

    @property
    def rows(self) -> int:
        """Remembered copies plus held orders and payments: the size the state grows with."""
        return self.remembered.num_rows + self.orders.num_rows + self.payments.num_rows


def _part(kind: str, table: pa.Table) -> pa.Table:
    columns = {"state_kind": pa.array([kind] * table.num_rows, pa.string())}
    for field in JOIN_STATE_SCHEMA:
        if field.name != "state_kind":
            columns[field.name] = table[field.name] if field.name in table.column_names else pa.nulls(table.num_rows, field.type)
    return pa.table(columns).cast(JOIN_STATE_SCHEMA)


def join_state_table(state: JoinState) -> pa.Table:
    clock = pa.table({name: pa.array([getattr(state.clock, name)], pa.int64()) for name in _CLOCK_FIELDS})
    parts = [("clock", clock), ("remembered", state.remembered), ("order", state.orders), ("payment", state.payments)]
    return pa.concat_tables([_part(kind, table) for kind, table in parts])


def join_state_from_table(table: pa.Table) -> JoinState:
    def kind(name: str, schema: pa.Schema) -> pa.Table:
        return table.filter(pc.equal(table["state_kind"], name)).select(schema.names).cast(schema)

    clocks = table.filter(pc.equal(table["state_kind"], "clock")).to_pylist()
    clock = ClockState(**{name: clocks[0][name] for name in _CLOCK_FIELDS}) if clocks else ClockState()
    return JoinState(clock, kind("remembered", REMEMBERED_SCHEMA), kind("order", HELD_SCHEMA), kind("payment", HELD_SCHEMA))

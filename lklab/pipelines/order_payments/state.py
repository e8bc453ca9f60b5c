"""What the order-payment join carries from one micro-batch to the next, and its one-table form.

* ``clock``: the log clock after the last line read (``shared.clock.ClockState``);
* ``remembered``: first copies a later copy can still be recognised against
  (``REMEMBERED_SCHEMA``: the event and ``remembered_from``, see ``shared.dedup``);
* ``orders``: on-time orders the watermark has not yet released: held while the watermark after a
  line is at most ``order_time + bound + allowed_lateness`` (``HELD_SCHEMA``; ``matched``: a
  payment has matched it already);
* ``payments``: on-time payments an on-time order can still arrive for: held while the watermark
  after a line is at most ``payment_time + bound + allowed_lateness`` (``HELD_SCHEMA``).

(``lklab.pipelines.order_payments.rule.JoinSettings.released_at``.) So the state holds each on-time event about
``bound + allowed_lateness + watermark_delay`` of event time, plus the dedup horizon's first
copies: its size grows with the event rate times that span (``rows``), not with the log. It is
committed as one table (``payments_state``, one row per clock, remembered copy or held event, told
apart by ``state_kind``).
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

from lklab.pipelines.order_payments.parse import ORDER_EVENT_SCHEMA
from shared.clock import ClockState
from shared.events import UTC_MICROS
from shared.stream_state import parts_schema, parts_table, table_parts

__all__ = [
    "REMEMBERED_SCHEMA",
    "HELD_SCHEMA",
    "JOIN_STATE_SCHEMA",
    "JoinState",
    "join_state_table",
    "join_state_from_table",
]

REMEMBERED_SCHEMA = pa.schema([*ORDER_EVENT_SCHEMA, pa.field("remembered_from", UTC_MICROS)])
HELD_SCHEMA = pa.schema([*ORDER_EVENT_SCHEMA, pa.field("matched", pa.bool_())])
JOIN_STATE_SCHEMA = parts_schema(
    "state_kind", REMEMBERED_SCHEMA, HELD_SCHEMA
)  # state_kind: clock | remembered | order | payment


@dataclass(frozen=True)
class JoinState:
    clock: ClockState
    remembered: pa.Table
    orders: pa.Table
    payments: pa.Table

    @classmethod
    def empty(cls) -> JoinState:
        return cls(ClockState(), REMEMBERED_SCHEMA.empty_table(), HELD_SCHEMA.empty_table(), HELD_SCHEMA.empty_table())

    @property
    def rows(self) -> int:
        """Remembered copies plus held orders and payments: the size the state grows with."""
        return self.remembered.num_rows + self.orders.num_rows + self.payments.num_rows


def join_state_table(state: JoinState) -> pa.Table:
    parts = {"remembered": state.remembered, "order": state.orders, "payment": state.payments}
    return parts_table(JOIN_STATE_SCHEMA, state.clock, parts, column="state_kind")


def join_state_from_table(table: pa.Table) -> JoinState:
    schemas = {"remembered": REMEMBERED_SCHEMA, "order": HELD_SCHEMA, "payment": HELD_SCHEMA}
    clock, parts = table_parts(table, schemas, column="state_kind")
    return JoinState(clock, parts["remembered"], parts["order"], parts["payment"])

"""The order-payment interval join, written once for the batch truth and the stream.

**The rule.** A payment *matches* an order when they name the same ``order_id`` and
``order_time <= payment_time <= order_time + bound`` (both ends inclusive; ``bound`` default 15
minutes, integer microseconds). The join is relational, many-to-many: an order takes every
payment in its interval (split payments, a second capture) and a payment pays every order of
its ``order_id`` whose interval holds it. ``order_id`` is not a uniqueness key: two order events
with different ``event_id`` and the same ``order_id`` are two orders (an amended order is a new
event). Retries are told apart by ``event_id`` alone (``shared.dedup``: the first copy in log
order is the event; ``PAYLOAD_COLUMNS`` decide ``payload_conflict``). Currencies are carried,
not compared. An order with no match is *unpaid*; a payment with no match is an *orphan*.

**Batch truth** (``join_events``) is that rule over every first copy of the complete log.

**The stream** (``join_step``) judges every line by the watermark ``W`` of the log's clock
(``shared.clock``; ``W*`` is the watermark in force after a line). The lab's watermark says
"every event before ``W`` is in", so a closed interval ``[a, b]`` is complete once ``W > b``.
Each event has a *match interval* that closes at ``closed_at``:

* an order's is ``[order_time, order_time + bound]`` (the payments it can take): ``closed_at =
  order_time + bound``;
* a payment's is the orders it can pay, ``[payment_time - bound, payment_time]``, whose earliest
  interval closes at ``payment_time``: ``closed_at = payment_time``.

As Flink's interval join and Spark's stream-stream join do, the watermark closes a row's match
interval and evicts it from the state; as windows do (``shared.watermark``), the *allowed
lateness* ``L`` keeps the interval open that much longer:

* an event is **late** when its line's ``W > closed_at + L``; it goes to the side output with its
  ``kind`` (which side it was), the watermark, ``closed_at`` and ``lateness_seconds`` (``W -
  closed_at``, always above ``L``), and joins nothing. An event behind its ``closed_at`` but
  within ``L`` is on time and joins as any other (Flink's interval join drops every event behind
  the watermark);
* an on-time order or payment is **held** until the first line with ``W* > event_time + bound +
  L`` (``released_at``): then an order nothing matched is a final *unpaid* row, a payment a final
  *orphan* (no on-time order can pay it any more: one with ``order_time <= payment_time`` needs
  ``W <= order_time + bound + L``).

Why matching on-time events always meet, whichever comes first: an on-time payment has ``W <=
payment_time + L <= order_time + bound + L``, an on-time order ``W <= order_time + bound + L <=
payment_time + bound + L``; and ``W*`` of a line is never above the ``W`` of a later line, so
the earlier one is still held when the later one arrives. The stream's matched pairs are exactly
the truth's pairs between on-time first copies, whatever the micro-batch cuts, and the unpaid
and orphan rows are final when emitted. The price of ``L``: the state holds every event ``L``
longer, and an unpaid order or an orphan is reported ``L`` later. Events still held at the end
of the log are *pending*.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame
from pyspark.sql.pandas.types import from_arrow_schema

from lklab.pipelines.order_payments.parse import (
    ORDER,
    ORDER_EVENT_SCHEMA,
    PAYLOAD_COLUMNS,
    PAYMENT,
    order_events,
)
from lklab.pipelines.order_payments.state import HELD_SCHEMA, REMEMBERED_SCHEMA, JoinState
from shared.clock import NO_TIME, ClockSettings, advance, line_keys
from shared.dedup import (
    MARK_FIELDS,
    deduplicate_stream,
    mark_duplicates_table,
    remembered_from,
    still_remembered,
)
from shared.events import HEARTBEAT_FIELD, UTC_MICROS
from shared.micro_batch import MicroBatch, duplicate_schema
from shared.spark_arrow import per_key, with_fields
from shared.speed import DEAD_LETTER_SCHEMA, dead_letter_rows
from shared.watermark import LATENESS_TYPE, lateness_seconds

__all__ = [
    "DEFAULT_BOUND",
    "JoinSettings",
    "JoinResult",
    "BatchJoin",
    "JoinBatch",
    "MATCH_SCHEMA",
    "MATCHED_SCHEMA",
    "OUTCOME_SCHEMA",
    "UNPAID_SCHEMA",
    "ORPHAN_SCHEMA",
    "LATE_JOIN_SCHEMA",
    "JOIN_DUPLICATE_SCHEMA",
    "DEAD_LETTER_SCHEMA",
    "interval_pairs",
    "join_events",
    "join_log",
    "outcome_rows",
    "outcome_result",
    "mark_order_duplicates",
    "batch_interval_join",
    "join_step",
]

_SECOND = 1_000_000
DEFAULT_BOUND = 15 * 60 * _SECOND
_SIDE = ("event_id", "segment", "line_number", "event_time", "amount", "currency", "ingest_time")
_BATCH = pa.field("batch_id", pa.int64(), nullable=False)


def _side_fields(side: str) -> list[pa.Field]:
    return [pa.field(f"{side}_{name}", ORDER_EVENT_SCHEMA.field(name).type) for name in _SIDE]


MATCH_SCHEMA = pa.schema([pa.field("order_id", pa.string()), *_side_fields(ORDER), *_side_fields(PAYMENT)])
MATCHED_SCHEMA = pa.schema([*MATCH_SCHEMA, _BATCH])
# the batch's rows through Spark: one table, ``outcome`` matched | unpaid (order_* set) | orphan (payment_* set)
OUTCOME_SCHEMA = pa.schema([pa.field("outcome", pa.string()), *MATCH_SCHEMA])
_CLOSED = [pa.field("watermark", UTC_MICROS), _BATCH]  # W* at the line after which it was final
UNPAID_SCHEMA = pa.schema([*ORDER_EVENT_SCHEMA, *_CLOSED])
ORPHAN_SCHEMA = pa.schema([*ORDER_EVENT_SCHEMA, *_CLOSED])
LATE_JOIN_SCHEMA = pa.schema(
    [
        *ORDER_EVENT_SCHEMA,
        pa.field("watermark", UTC_MICROS),
        pa.field("closed_at", UTC_MICROS),
        pa.field("lateness_seconds", LATENESS_TYPE),
        _BATCH,
    ]
)
JOIN_DUPLICATE_SCHEMA = duplicate_schema(ORDER_EVENT_SCHEMA)


def _micros(column) -> np.ndarray:
    return column.cast(pa.int64()).fill_null(NO_TIME).to_numpy(zero_copy_only=False)


def _timestamps(values: np.ndarray) -> pa.Array:
    values = np.asarray(values, dtype=np.int64)
    return pa.array(values, pa.int64(), mask=values == NO_TIME).cast(UTC_MICROS)


def _by_line(table: pa.Table, *prefix: str) -> pa.Table:
    keys = [k for p in (prefix or ("",)) for k in ((f"{p}segment", "ascending"), (f"{p}line_number", "ascending"))]
    return table.take(pc.sort_indices(table, sort_keys=keys)) if table.num_rows else table


@dataclass(frozen=True)
class JoinSettings:
    """``bound``: how long after its order a payment still matches; the clock's
    ``watermark_delay`` and ``watermark_interval``; the ``dedup_horizon``; ``allowed_lateness``:
    how long after the watermark closed an event's match interval it still joins (all
    microseconds). The rule's times live here, once: ``closed_at``, ``is_late``, ``released_at``."""

    bound: int = DEFAULT_BOUND
    watermark_delay: int = 60 * _SECOND
    watermark_interval: int = _SECOND
    dedup_horizon: int = 3600 * _SECOND
    allowed_lateness: int = 0

    def __post_init__(self) -> None:
        for name in ("bound", "watermark_delay", "watermark_interval", "dedup_horizon", "allowed_lateness"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name.replace('_', '-')} must not be negative, got {getattr(self, name)}")

    @property
    def clock(self) -> ClockSettings:
        return ClockSettings(self.watermark_delay, self.watermark_interval)

    def closed_at(self, times: np.ndarray, is_order: np.ndarray) -> np.ndarray:
        """When each event's match interval closes: ``order_time + bound`` for an order, the
        payment's own time for a payment (the earliest order it can pay closes then)."""
        return np.where(is_order, times + self.bound, times)

    def is_late(self, closed_at: np.ndarray, watermark: np.ndarray) -> np.ndarray:
        """Late: the watermark ``W`` its line was judged by is past ``closed_at + allowed_lateness``
        (an unknown ``W`` makes nothing late)."""
        return (watermark != NO_TIME) & (watermark > closed_at + self.allowed_lateness)

    def released_at(self, times: np.ndarray) -> np.ndarray:
        """An on-time event is held until ``W* > event_time + bound + allowed_lateness``: then no
        on-time partner can still come, and an unmatched one is final (unpaid or orphan)."""
        return times + self.bound + self.allowed_lateness


def interval_pairs(orders: pa.Table, payments: pa.Table, bound: int) -> tuple[np.ndarray, np.ndarray]:
    """Row indices ``(order, payment)`` of every matching pair (same ``order_id``, ``order_time
    <= payment_time <= order_time + bound``), sorted by order row then payment row."""
    left = pa.table({"order_id": orders["order_id"], "_o": pa.array(np.arange(orders.num_rows), pa.int64())})
    right = pa.table({"order_id": payments["order_id"], "_p": pa.array(np.arange(payments.num_rows), pa.int64())})
    if not (left.num_rows and right.num_rows):
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    joined = left.join(right, "order_id", join_type="inner", use_threads=False)
    o, p = joined["_o"].to_numpy(), joined["_p"].to_numpy()
    to, tp = _micros(orders["event_time"])[o], _micros(payments["event_time"])[p]
    keep = (to <= tp) & (tp <= to + bound)
    o, p = o[keep], p[keep]
    order = np.lexsort((p, o))
    return o[order], p[order]


def _side(table: pa.Table, rows: np.ndarray, side: str) -> dict:
    chosen = table.take(pa.array(rows, pa.int64()))
    return {f"{side}_{name}": chosen[name] for name in _SIDE}


def _pairs_table(orders: pa.Table, payments: pa.Table, o: np.ndarray, p: np.ndarray) -> pa.Table:
    chosen = orders.take(pa.array(o, pa.int64()))
    return pa.table({"order_id": chosen["order_id"], **_side(orders, o, ORDER), **_side(payments, p, PAYMENT)}).cast(
        MATCH_SCHEMA
    )


@dataclass(frozen=True)
class JoinResult:
    """``matched`` (``MATCH_SCHEMA``), ``unpaid`` orders and ``orphans`` (payments), both
    ``ORDER_EVENT_SCHEMA``; each sorted by line."""

    matched: pa.Table
    unpaid: pa.Table
    orphans: pa.Table


def join_events(events: pa.Table, bound: int) -> JoinResult:
    """The rule over ``events`` (first copies, ``ORDER_EVENT_SCHEMA``, any order): every event
    of an ``order_id`` must be present (the batch view)."""
    events = events.select(ORDER_EVENT_SCHEMA.names).cast(ORDER_EVENT_SCHEMA)
    orders = _by_line(events.filter(pc.equal(events["kind"], ORDER)))
    payments = _by_line(events.filter(pc.equal(events["kind"], PAYMENT)))
    o, p = interval_pairs(orders, payments, bound)
    paid = np.zeros(orders.num_rows, dtype=bool)
    paid[o] = True
    used = np.zeros(payments.num_rows, dtype=bool)
    used[p] = True
    matched = _by_line(_pairs_table(orders, payments, o, p), "order_", "payment_")
    return JoinResult(matched, orders.filter(pa.array(~paid)), payments.filter(pa.array(~used)))


def outcome_rows(result: JoinResult) -> pa.Table:
    """A ``JoinResult`` as one ``OUTCOME_SCHEMA`` table (what a Spark task returns)."""

    def one_side(events: pa.Table, side: str, outcome: str) -> pa.Table:
        rows = np.arange(events.num_rows)
        columns = {
            "outcome": pa.array([outcome] * events.num_rows, pa.string()),
            "order_id": events["order_id"],
            **_side(events, rows, side),
        }
        return pa.table({f.name: columns.get(f.name, pa.nulls(events.num_rows, f.type)) for f in OUTCOME_SCHEMA}).cast(
            OUTCOME_SCHEMA
        )

    matched = result.matched
    matched = pa.table(
        {
            "outcome": pa.array(["matched"] * matched.num_rows, pa.string()),
            **{n: matched[n] for n in MATCH_SCHEMA.names},
        }
    )
    return pa.concat_tables(
        [
            matched.cast(OUTCOME_SCHEMA),
            one_side(result.unpaid, ORDER, "unpaid"),
            one_side(result.orphans, PAYMENT, "orphan"),
        ]
    )


def outcome_result(outcomes: pa.Table) -> JoinResult:
    """``OUTCOME_SCHEMA`` rows (e.g. collected from ``batch_interval_join``) as a ``JoinResult``."""
    outcomes = outcomes.cast(OUTCOME_SCHEMA)

    def events(outcome: str, side: str) -> pa.Table:
        rows = outcomes.filter(pc.equal(outcomes["outcome"], outcome))
        columns = {name: rows[f"{side}_{name}"] for name in _SIDE}
        columns.update(kind=pa.array([side] * rows.num_rows, pa.string()), order_id=rows["order_id"])
        return _by_line(pa.table({n: columns[n] for n in ORDER_EVENT_SCHEMA.names}).cast(ORDER_EVENT_SCHEMA))

    matched = outcomes.filter(pc.equal(outcomes["outcome"], "matched")).select(MATCH_SCHEMA.names).cast(MATCH_SCHEMA)
    return JoinResult(_by_line(matched, "order_", "payment_"), events("unpaid", ORDER), events("orphan", PAYMENT))


@dataclass(frozen=True)
class BatchJoin:
    """The batch view of a complete log in Arrow: the ``result``, the ``duplicates`` (later
    copies with ``MARK_FIELDS``) and the ``dead_letters`` (parsed rows with a reason)."""

    result: JoinResult
    duplicates: pa.Table
    dead_letters: pa.Table


def join_log(parsed: pa.Table, bound: int) -> BatchJoin:
    """Dedup over the whole log, then ``join_events``: the truth of ``parse_order_lines`` rows."""
    marked = mark_duplicates_table(order_events(parsed), PAYLOAD_COLUMNS)
    firsts = marked.filter(pc.invert(marked["is_duplicate"]))
    return BatchJoin(
        join_events(firsts, bound),
        marked.filter(marked["is_duplicate"]),
        parsed.filter(pc.is_valid(parsed["reject_reason"])),
    )


def mark_order_duplicates(events: DataFrame) -> DataFrame:
    """Dedup by ``event_id`` over a DataFrame of order events (``shared.dedup``'s rule with the
    order payload); ``shared.dedup.first_copies`` / ``later_copies`` split the result."""
    return per_key(
        events,
        ["event_id"],
        lambda t: mark_duplicates_table(t, PAYLOAD_COLUMNS),
        with_fields(events.schema, *MARK_FIELDS),
    )


def batch_interval_join(first_copies: DataFrame, bound: int) -> DataFrame:
    """``join_events`` through Spark, partitioned by ``order_id`` (every event of an order id in
    one call): ``OUTCOME_SCHEMA`` rows."""
    events = first_copies.select(*ORDER_EVENT_SCHEMA.names)
    return per_key(
        events, ["order_id"], lambda t: outcome_rows(join_events(t, bound)), from_arrow_schema(OUTCOME_SCHEMA)
    )


@dataclass(frozen=True)
class JoinBatch(MicroBatch[JoinState]):
    """Where the lines of one micro-batch went (``MicroBatch``), and the state after it.

    ``matched``: pairs met in this batch; ``unpaid`` / ``orphans``:
    orders / payments that became final without a match in this batch.
    """

    late: pa.Table
    matched: pa.Table
    unpaid: pa.Table
    orphans: pa.Table


def _with(table: pa.Table, **columns) -> pa.Table:
    for name, values in columns.items():
        table = table.append_column(
            name, values if isinstance(values, (pa.Array, pa.ChunkedArray)) else pa.array(values)
        )
    return table


def _held(events: pa.Table, matched: np.ndarray) -> pa.Table:
    return _with(events.select(ORDER_EVENT_SCHEMA.names), matched=pa.array(matched, pa.bool_())).cast(HELD_SCHEMA)


def _closed(
    held: pa.Table, released: np.ndarray, after: int | None, w_star: np.ndarray, batch_id: int, schema: pa.Schema
):
    """Split ``held`` into the rows still held and the unmatched rows made final (``W* >
    released``), each final row with the ``W*`` of the line that released it."""
    gone = np.zeros(held.num_rows, dtype=bool) if after is None else after > released
    final = gone & ~held["matched"].to_numpy(zero_copy_only=False)
    at = np.searchsorted(w_star, released[final], side="right")
    rows = held.filter(pa.array(final)).select(ORDER_EVENT_SCHEMA.names)
    rows = _with(rows, watermark=_timestamps(w_star[at]), batch_id=pa.array(np.full(len(at), batch_id), pa.int64()))
    return held.filter(pa.array(~gone)), rows.cast(schema)


def join_step(parsed: pa.Table, state: JoinState, settings: JoinSettings, batch_id: int) -> JoinBatch:
    """Where every line of micro-batch ``batch_id`` goes (``parsed``: ``parse_order_lines`` rows);
    see the module docstring for the rules."""
    parsed = parsed.take(pc.sort_indices(parsed, sort_keys=[("segment", "ascending"), ("line_number", "ascending")]))
    count = parsed.num_rows
    keys = line_keys(parsed["segment"].to_numpy(), parsed["line_number"].to_numpy())
    is_event = pc.and_(pc.is_null(parsed["reject_reason"]), pc.invert(parsed[HEARTBEAT_FIELD]))
    flags = is_event.to_numpy(zero_copy_only=False) if count else np.zeros(0, dtype=bool)
    run = advance(
        state.clock,
        settings.clock,
        keys,
        _micros(parsed["ingest_time"]),
        np.where(flags, _micros(parsed["event_time"]), NO_TIME),
    )
    events = _with(
        order_events(parsed), _line=keys[flags], _w=run.watermark[flags], _w_after=run.watermark_after[flags]
    )
    dedup = deduplicate_stream(events, state.remembered, settings.dedup_horizon, PAYLOAD_COLUMNS)
    firsts, bound = dedup.firsts, settings.bound

    times, marks = _micros(firsts["event_time"]), firsts["_w"].to_numpy()
    is_order = (
        pc.equal(firsts["kind"], ORDER).to_numpy(zero_copy_only=False) if firsts.num_rows else np.zeros(0, dtype=bool)
    )
    closes = settings.closed_at(times, is_order)
    late = settings.is_late(closes, marks)
    late_rows = _with(
        firsts.filter(pa.array(late)).select(ORDER_EVENT_SCHEMA.names),
        watermark=_timestamps(marks[late]),
        closed_at=_timestamps(closes[late]),
        lateness_seconds=lateness_seconds(closes[late], marks[late]),
        batch_id=pa.array(np.full(int(late.sum()), batch_id), pa.int64()),
    ).cast(LATE_JOIN_SCHEMA)

    new_orders = firsts.filter(pa.array(~late & is_order))
    new_payments = firsts.filter(pa.array(~late & ~is_order))
    orders = pa.concat_tables([state.orders, _held(new_orders, np.zeros(new_orders.num_rows, dtype=bool))])
    payments = pa.concat_tables([state.payments, _held(new_payments, np.zeros(new_payments.num_rows, dtype=bool))])
    o, p = interval_pairs(orders, payments, bound)
    fresh = (o >= state.orders.num_rows) | (p >= state.payments.num_rows)  # held x held met before
    o, p = o[fresh], p[fresh]
    order_matched, payment_matched = (
        orders["matched"].to_numpy(zero_copy_only=False).copy(),
        payments["matched"].to_numpy(zero_copy_only=False).copy(),
    )
    order_matched[o], payment_matched[p] = True, True
    orders, payments = (
        orders.set_column(orders.schema.get_field_index("matched"), "matched", pa.array(order_matched)),
        payments.set_column(payments.schema.get_field_index("matched"), "matched", pa.array(payment_matched)),
    )
    matched = _with(
        _pairs_table(orders, payments, o, p), batch_id=pa.array(np.full(len(o), batch_id), pa.int64())
    ).cast(MATCHED_SCHEMA)

    after = run.state.watermark_after(settings.clock)
    w_star = run.watermark_after
    held_orders, unpaid = _closed(
        orders, settings.released_at(_micros(orders["event_time"])), after, w_star, batch_id, UNPAID_SCHEMA
    )
    held_payments, orphans = _closed(
        payments, settings.released_at(_micros(payments["event_time"])), after, w_star, batch_id, ORPHAN_SCHEMA
    )

    since = remembered_from(times, marks)
    remembered = pa.concat_tables(
        [
            state.remembered,
            _with(firsts.select(ORDER_EVENT_SCHEMA.names), remembered_from=_timestamps(since)).cast(REMEMBERED_SCHEMA),
        ]
    )
    duplicates = _with(
        dedup.duplicates.select(JOIN_DUPLICATE_SCHEMA.names[:-1]),
        batch_id=pa.array(np.full(dedup.duplicates.num_rows, batch_id), pa.int64()),
    )
    first_mark = int(run.watermark[0]) if count else NO_TIME
    return JoinBatch(
        input_lines=count,
        heartbeats=int(pc.sum(parsed[HEARTBEAT_FIELD]).as_py() or 0) if count else 0,
        watermark=(None if first_mark == NO_TIME else first_mark) if count else after,
        next_watermark=after,
        dead_letters=dead_letter_rows(parsed, np.full(count, batch_id, dtype=np.int64)),
        duplicates=duplicates.cast(JOIN_DUPLICATE_SCHEMA),
        late=late_rows,
        matched=matched,
        unpaid=unpaid,
        orphans=orphans,
        state=JoinState(
            run.state, still_remembered(remembered, after, settings.dedup_horizon), held_orders, held_payments
        ),
    )

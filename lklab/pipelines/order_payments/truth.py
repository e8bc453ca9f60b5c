"""Ground truth of the order-payment join, computed without the lab's rule.

An independent implementation over the generator's real events (pandas, integer times): a
payment pays an order when they share ``order_id`` and ``order_time <= payment_time <=
order_time + bound``; every such pair is matched (many-to-many), an order in no pair is unpaid,
a payment in no pair an orphan. It shares no code with ``lklab.pipelines.order_payments.rule``, so a result of
the lab (batch or stream) can be checked against something that did not compute it.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from lklab.pipelines.order_payments.generator import OrderPaymentEvents

__all__ = ["JoinTruth", "join_truth"]


@dataclass(frozen=True)
class JoinTruth:
    """``matched``: ``(order event_id, payment event_id)`` pairs; ``unpaid`` / ``orphans``: event ids."""

    matched: frozenset[tuple[str, str]]
    unpaid: frozenset[str]
    orphans: frozenset[str]


def join_truth(events: OrderPaymentEvents, bound: int) -> JoinTruth:
    """The join over ``events`` with ``bound`` in microseconds."""
    frame = pd.DataFrame(
        {"event_id": events.event_ids, "kind": events.kinds, "order_id": events.order_ids, "t": events.event_times}
    )
    orders, payments = frame[frame["kind"] == "order"], frame[frame["kind"] == "payment"]
    both = orders.merge(payments, on="order_id", suffixes=("_order", "_payment"))
    inside = both[(both["t_order"] <= both["t_payment"]) & (both["t_payment"] <= both["t_order"] + bound)]
    matched = frozenset(zip(inside["event_id_order"], inside["event_id_payment"]))
    return JoinTruth(
        matched=matched,
        unpaid=frozenset(set(orders["event_id"]) - set(inside["event_id_order"])),
        orphans=frozenset(set(payments["event_id"]) - set(inside["event_id_payment"])),
    )

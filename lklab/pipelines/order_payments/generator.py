"""Deterministic order-payment logs (the ``order_payments`` pipeline), by seed.

Orders are placed uniformly over ``span``; most are paid once, some in two parts (split tender),
some never (abandoned carts), and some payments name an order the log never sees (another
shop's order id). On top of the everyday arrival delay (median two seconds, lognormal):

* **slow confirmations**: the gateway confirms a payment minutes to hours after the order
  (most within a few minutes; ``slow_share`` of them after 20 minutes to 3 hours, beyond a 15
  minute bound: the truth calls those orders unpaid and the payments orphans);
* **gateway retries**: ``retry_rate`` of the payments are resent with the same ``event_id``
  and payload, seconds to minutes later (duplicates);
* **offline clients**: ``offline_share`` of the orders are placed on a client that flushes
  them minutes to hours later (late orders for the stream);
* **a regional outage**: one gateway region in four (by order) is cut off for
  ``outage_length`` from 30% of the span; its confirmations queue and drain over 20 minutes
  when it ends (late payments);
* **bad lines**: ``malformed_rate`` of the lines, each spoiled for a known reason.

Every line carries its ``ingest_time``; lines are ordered by it and cut into one segment per
``segment_interval`` (``shared.eventlog``). The real events (valid, unique) are written to
``generator/order_payments.npz`` and the counts to ``generator/order_payments_manifest.json``;
``lklab.pipelines.order_payments.truth`` derives the join's truth from them without the lab's rule.
All times are integer microseconds (multiples of a millisecond).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import ClassVar

import numpy as np

from lklab.generator_params import LogParams
from lklab.scenarios import EPOCH_START, HOUR, MINUTE, SECOND
from shared.currencies import MINOR_UNITS
from shared.eventlog import EventLog
from shared.generated_log import (
    EventColumns,
    append_segments,
    ingest_segments,
    load_columns,
    save_columns,
    spoiled_lines,
)
from shared.locks import whole_lake

__all__ = [
    "OrderPaymentParams",
    "OrderPaymentEvents",
    "GeneratedOrderPayments",
    "generate_order_payments",
    "load_order_payments",
    "MALFORMED_KINDS",
]

_CURRENCIES = ("EUR", "EUR", "USD", "USD", "GBP", "JPY")
MALFORMED_KINDS: dict[str, tuple[str, Callable[[dict], str]]] = {
    "truncated": ("not_json", lambda e: json.dumps(e)[: len(json.dumps(e)) // 2]),
    "no_order_id": ("missing_field", lambda e: json.dumps({k: v for k, v in e.items() if k != "order_id"})),
    "amount_number": ("wrong_type", lambda e: json.dumps({**e, "amount": 12.5})),
    "kind_unknown": ("invalid_kind", lambda e: json.dumps({**e, "kind": "refund"})),
    "amount_zero": ("amount_sign", lambda e: json.dumps({**e, "amount": "0.00"})),
    "currency_lower": ("invalid_currency", lambda e: json.dumps({**e, "currency": e["currency"].lower()})),
    "time_no_offset": ("invalid_event_time", lambda e: json.dumps({**e, "event_time": e["event_time"][:-1]})),
    "blank": ("empty_line", lambda e: ""),
}


@dataclass(frozen=True)
class OrderPaymentParams(LogParams):
    """What to generate, besides ``LogParams``'. Times are microseconds; shares and rates are fractions."""

    counts: ClassVar[tuple[str, ...]] = ("orders",)
    fractions: ClassVar[tuple[str, ...]] = (
        "unpaid_share",
        "split_share",
        "foreign_share",
        "slow_share",
        "retry_rate",
        "offline_share",
        "malformed_rate",
    )

    malformed_rate: float = 0.002
    orders: int = 10_000
    start: int = EPOCH_START
    span: int = 6 * HOUR
    unpaid_share: float = 0.05
    split_share: float = 0.05
    foreign_share: float = 0.01  # payments for order ids the log never sees, per order
    slow_share: float = 0.03
    retry_rate: float = 0.03
    offline_share: float = 0.02
    outage_length: int = HOUR

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.span < SECOND or self.segment_interval < 1000 or self.outage_length < 0:
            raise ValueError("span must be at least 1s, segment-interval at least 1ms, outage-length not negative")


@dataclass(frozen=True)
class OrderPaymentEvents(EventColumns):
    """The real (valid, unique) events as columns: ``kinds`` order | payment, amounts in the
    currency's minor units, times in microseconds."""

    kinds: np.ndarray
    order_ids: np.ndarray
    currencies: np.ndarray
    amount_minor: np.ndarray


@dataclass(frozen=True)
class GeneratedOrderPayments:
    events: OrderPaymentEvents
    manifest: dict


def _iso(micros: np.ndarray) -> list[str]:
    return np.char.add(np.datetime_as_string(micros.astype("datetime64[us]"), unit="ms"), "Z").tolist()


def _amount_text(minor: int, currency: str) -> str:
    places = MINOR_UNITS[currency]
    whole, fraction = divmod(minor, 10**places)
    return f"{whole}.{fraction:0{places}d}" if places else str(whole)


def _log_uniform(rng: np.random.Generator, low: int, high: int, size: int) -> np.ndarray:
    return np.exp(rng.uniform(np.log(low), np.log(high), size)).astype(np.int64)


def _ms(values: np.ndarray) -> np.ndarray:
    return np.asarray(values, dtype=np.int64) // 1000 * 1000


def _draw(params: OrderPaymentParams, rng: np.random.Generator) -> OrderPaymentEvents:
    n = params.orders
    order_times = params.start + _ms(np.sort(rng.integers(0, params.span, n)))
    currencies = np.array(_CURRENCIES)[rng.integers(0, len(_CURRENCIES), n)]
    places = np.array([MINOR_UNITS[c] for c in currencies.tolist()])
    totals = np.maximum(2, (rng.lognormal(np.log(40.0), 0.8, n) * 10.0**places).astype(np.int64))
    order_ids = np.char.add(f"ord-{params.seed}-", np.char.zfill(np.arange(n).astype(str), 7))
    fate = rng.random(n)
    paid = fate >= params.unpaid_share
    split = paid & (fate < params.unpaid_share + params.split_share)

    # payments: one per paid order, a second for split ones; confirmation delay after the order
    payer = np.concatenate([np.flatnonzero(paid), np.flatnonzero(split)])
    first_part = np.where(split, totals // 2, totals)
    amounts = np.concatenate([first_part[paid], (totals - totals // 2)[split]])
    confirm = _ms(30 * SECOND * rng.lognormal(0.0, 1.0, len(payer)))
    slow = rng.random(len(payer)) < params.slow_share
    confirm[slow] = _ms(_log_uniform(rng, 20 * MINUTE, 3 * HOUR, int(slow.sum())))
    payment_times = order_times[payer] + confirm
    foreign = int(round(n * params.foreign_share))
    foreign_times = params.start + _ms(rng.integers(0, params.span, foreign))
    foreign_currency = np.array(_CURRENCIES)[rng.integers(0, len(_CURRENCIES), foreign)]

    kinds = np.array(["order"] * n + ["payment"] * (len(payer) + foreign))
    all_times = np.concatenate([order_times, payment_times, foreign_times])
    delays = _ms(2 * SECOND * rng.lognormal(0.0, 1.0, len(all_times)))
    offline = np.flatnonzero(rng.random(n) < params.offline_share)
    delays[offline] = _ms(_log_uniform(rng, MINUTE, 3 * HOUR, len(offline)))
    outage_start = params.start + int(params.span * 0.3) // MINUTE * MINUTE
    region = np.concatenate([np.arange(n), payer, np.arange(foreign)]) % 4 == 0
    held = (
        (kinds == "payment") & region & (all_times >= outage_start) & (all_times < outage_start + params.outage_length)
    )
    released = (
        outage_start
        + params.outage_length
        + (all_times[held] - outage_start) * (20 * MINUTE) // max(params.outage_length, 1)
    )
    delays[held] = _ms(released - all_times[held] + delays[held] // 10)
    return OrderPaymentEvents(
        event_ids=np.array(
            [f"o{params.seed}-{i:07d}" for i in range(n)]
            + [f"p{params.seed}-{i:07d}" for i in range(len(payer) + foreign)]
        ),
        kinds=kinds,
        order_ids=np.concatenate(
            [order_ids, order_ids[payer], np.char.add(f"ext-{params.seed}-", np.arange(foreign).astype(str))]
        ),
        currencies=np.concatenate([currencies, currencies[payer], foreign_currency]),
        amount_minor=np.concatenate(
            [totals, amounts, np.maximum(1, (rng.lognormal(np.log(20.0), 0.8, foreign) * 100).astype(np.int64))]
        ),
        event_times=all_times,
        ingest_times=all_times + delays,
    )


def _records(events: OrderPaymentEvents, rows: np.ndarray, ingest: np.ndarray) -> list[dict]:
    return [
        {
            "event_id": i,
            "kind": k,
            "order_id": o,
            "amount": _amount_text(int(m), c),
            "currency": c,
            "event_time": t,
            "ingest_time": g,
        }
        for i, k, o, m, c, t, g in zip(
            events.event_ids[rows].tolist(),
            events.kinds[rows].tolist(),
            events.order_ids[rows].tolist(),
            events.amount_minor[rows].tolist(),
            events.currencies[rows].tolist(),
            _iso(events.event_times[rows]),
            _iso(ingest),
        )
    ]


def generate_order_payments(params: OrderPaymentParams, lake: str | Path) -> GeneratedOrderPayments:
    """Append the log to ``<lake>/log`` (which must hold no segments yet) and write the real
    events and the manifest under ``<lake>/generator``. The lake is locked whole meanwhile."""
    lake = Path(lake)
    with whole_lake(lake):
        log = EventLog(lake)
        if log.last_segment():
            raise FileExistsError(f"{lake} already holds a log ({log.last_segment()} segments); choose another lake")
        rng = np.random.default_rng(params.seed)
        events = _draw(params, rng)
        count = len(events.event_ids)
        payments = np.flatnonzero(events.kinds == "payment")
        retried = np.sort(rng.choice(payments, size=int(round(len(payments) * params.retry_rate)), replace=False))
        retry_ingest = events.ingest_times[retried] + _ms(_log_uniform(rng, SECOND, 10 * MINUTE, len(retried)))
        spoiled = rng.integers(0, count, int(round(count * params.malformed_rate)))
        kinds = list(MALFORMED_KINDS)
        chosen = [kinds[k] for k in rng.integers(0, len(kinds), len(spoiled))]
        bad_ingest = events.ingest_times[spoiled] + _ms(rng.integers(0, 10 * SECOND, len(spoiled)))
        bad, reasons = spoiled_lines(_records(events, spoiled, bad_ingest), chosen, MALFORMED_KINDS)
        lines = [json.dumps(r) for r in _records(events, np.arange(count), events.ingest_times)]
        lines += [json.dumps(r) for r in _records(events, retried, retry_ingest)] + bad
        ingest = np.concatenate([events.ingest_times, retry_ingest, bad_ingest])
        pieces = ingest_segments(ingest, params.start, params.segment_interval)
        append_segments(log, lines, pieces)
        manifest = {
            "params": asdict(params),
            "lines": len(lines),
            "segments": len(pieces),
            "orders": int((events.kinds == "order").sum()),
            "payments": int(len(payments)),
            "retries": int(len(retried)),
            "dead_letters": dict(sorted(Counter(reasons).items())),
        }
        (lake / "generator").mkdir(parents=True, exist_ok=True)
        (lake / "generator" / "order_payments_manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
        save_columns(lake / "generator" / "order_payments.npz", events)
        return GeneratedOrderPayments(events, manifest)


def load_order_payments(lake: str | Path) -> OrderPaymentEvents | None:
    """The real events generated into ``lake`` (None if none were)."""
    return load_columns(Path(lake) / "generator" / "order_payments.npz", OrderPaymentEvents)

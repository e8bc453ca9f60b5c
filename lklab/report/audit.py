"""The finance audit: every late billing event, where it went, and totals per account.

One row per late event of the billing stream, window it was late for, and configuration, because
whether an event is late, and what happens to it, depends on the watermark delay and the allowed
lateness (and, with sliding windows, on the window: an event can be late for several windows, or
absorbed by one and sent to the side output by another):

* ``absorbed`` — a late update the stream still applied within the allowed lateness;
* ``side_output`` — written to ``late_events`` and left out of the stream's answer;
* ``folded_in`` — left out by the stream, then counted by the batch recompute (Lambda) or the
  reconciliation, so the served answer holds it in the end.

Amounts are signed (refunds negative) and exact; totals are per account *and* currency, and add
an event's amount once per window it was late for (what those windows missed).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from decimal import Decimal
from typing import Literal

from .validation import check_decimal, check_per_currency, check_utc, freeze

__all__ = ["DISPOSITIONS", "LateBillingEvent", "LateTotal", "FinanceAudit"]

DISPOSITIONS = ("absorbed", "side_output", "folded_in")


@dataclass(frozen=True)
class LateBillingEvent:
    """A billing event that arrived after the watermark passed its window's end.

    ``configuration``: the key of the configuration it was late in (``Configuration.key``).
    ``lateness_seconds``: watermark - event time when it arrived (the side output's
    ``lateness_seconds``), exact. The window is ``[window_start, window_end)``.
    """

    configuration: str
    event_id: str
    account_id: str
    amount: Decimal
    currency: str
    event_time: dt.datetime
    ingest_time: dt.datetime
    lateness_seconds: Decimal
    window_start: dt.datetime
    window_end: dt.datetime
    disposition: Literal["absorbed", "side_output", "folded_in"]

    def __post_init__(self) -> None:
        check_per_currency({self.currency: self.amount}, f"event {self.event_id} amount")
        check_decimal(self.lateness_seconds, f"event {self.event_id} lateness_seconds")
        for name in ("event_time", "ingest_time", "window_start", "window_end"):
            check_utc(getattr(self, name), f"event {self.event_id} {name}")
        if self.disposition not in DISPOSITIONS:
            raise ValueError(
                f"event {self.event_id}: disposition {self.disposition!r}; use one of {', '.join(DISPOSITIONS)}"
            )


@dataclass(frozen=True)
class LateTotal:
    """Late money in one currency under one configuration, net (signed) and by disposition.

    ``account_id`` is ``None`` for the total over all accounts. ``events``: audit rows (one per
    event and window it was late for).
    """

    configuration: str
    account_id: str | None
    currency: str
    events: int
    amount: Decimal
    absorbed: Decimal
    side_output: Decimal
    folded_in: Decimal


@dataclass(frozen=True)
class FinanceAudit:
    """Every late billing event; ``events`` in the order given (the CSV keeps that order)."""

    events: tuple[LateBillingEvent, ...]

    def __post_init__(self) -> None:
        freeze(self, "events", tuple(self.events))
        keys = [(e.configuration, e.event_id, e.window_start, e.window_end) for e in self.events]
        if len(keys) != len(set(keys)):
            raise ValueError("an event appears twice for one window in the audit of one configuration")

    def of(self, configuration: str) -> tuple[LateBillingEvent, ...]:
        return tuple(e for e in self.events if e.configuration == configuration)

    def largest(self, configuration: str, limit: int) -> tuple[LateBillingEvent, ...]:
        """Per currency, the ``limit`` events of a configuration with the largest ``|amount|``
        (ties: earlier event time, then event id); by currency, then largest first. Amounts of
        different currencies are not compared, so each currency gets its own ``limit``."""
        ranked = sorted(self.of(configuration), key=lambda e: (e.currency, -abs(e.amount), e.event_time, e.event_id))
        kept: dict[str, int] = {}
        chosen = []
        for event in ranked:
            if kept.get(event.currency, 0) < limit:
                kept[event.currency] = kept.get(event.currency, 0) + 1
                chosen.append(event)
        return tuple(chosen)

    def account_totals(self, configuration: str | None = None) -> tuple[LateTotal, ...]:
        """Totals per (configuration, account, currency), sorted by those three."""
        return self._totals(configuration, by_account=True)

    def currency_totals(self, configuration: str | None = None) -> tuple[LateTotal, ...]:
        """Totals per (configuration, currency) over all accounts, sorted by those two."""
        return self._totals(configuration, by_account=False)

    def _totals(self, configuration: str | None, by_account: bool) -> tuple[LateTotal, ...]:
        totals: dict[tuple, dict] = {}
        for event in self.events:
            if configuration is not None and event.configuration != configuration:
                continue
            key = (event.configuration, event.account_id if by_account else None, event.currency)
            row = totals.setdefault(key, {"events": 0, "amount": Decimal(0), **{d: Decimal(0) for d in DISPOSITIONS}})
            row["events"] += 1
            row["amount"] += event.amount
            row[event.disposition] += event.amount
        return tuple(
            LateTotal(*key, **row)
            for key, row in sorted(totals.items(), key=lambda kv: (kv[0][0], kv[0][1] or "", kv[0][2]))
        )

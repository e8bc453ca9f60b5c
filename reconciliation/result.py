"""What a reconciliation found, as frozen values: computed once, rendered by ``render``.

Money is ``Decimal`` in the currency's units and is never summed across currencies. Event
counts and money deltas are ``truth - stream``. Lateness is in seconds (how far behind the
watermark an event arrived); percentiles are nearest-rank (``nearest_rank``) over the distinct
late events.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:  # only annotations: the report reads this module without Spark
    from reconciliation.tolerance import Tolerance
    from shared.partitions import DayRange

__all__ = [
    "Explanation",
    "Lateness",
    "CurrencyReconciliation",
    "WindowGap",
    "Reconciliation",
    "nearest_rank",
    "weighted_nearest_rank",
    "weighted_waits",
    "rank_sql",
]

T = TypeVar("T")


def _probability(probability: Decimal | str | float) -> Decimal:
    """``probability`` as an exact decimal (a float is read as the decimal it prints as)."""
    p = Decimal(repr(probability)) if isinstance(probability, float) else Decimal(probability)
    if not 0 <= p <= 1:
        raise ValueError(f"probability {probability!r}: a number from 0 to 1")
    return p


def nearest_rank(ordered: Sequence[T], probability: Decimal | str | float) -> T | None:
    """The ``probability`` quantile of an ascending sequence by nearest rank: the smallest value
    with at least ``probability`` of the values at or below it, a value of ``ordered`` itself
    (a ``Decimal`` stays exact, an integer stays an integer). ``None`` for an empty sequence.

    This is the lab's one percentile. It is NumPy's ``inverted_cdf`` method
    (``numpy.quantile(values, p, method="inverted_cdf")``, the inverse of the empirical
    distribution function): the value of rank ``ceil(p * n)``, the lowest value for ``p = 0``.
    NumPy computes ``p * n`` in binary floating point, so 0.07 of 100 values is rank 8 there
    (``0.07 * 100 == 7.000000000000001``); here the rank is computed exactly, 7. ``rank_sql``
    is the same rank for Spark.
    """
    p = _probability(probability)
    if len(ordered) == 0:
        return None
    return ordered[max(math.ceil(p * len(ordered)), 1) - 1]


def weighted_nearest_rank(ordered: Sequence[tuple[T, int]], probability: Decimal | str | float) -> T | None:
    """``nearest_rank`` over values that repeat: ``ordered`` holds ``(value, count)`` pairs in
    ascending order of value, each standing for ``count`` copies of its value (a count of 0 or
    less stands for none). The same rank, ``ceil(p * n)`` computed exactly, over the ``n``
    copies in all. ``None`` when there are none."""
    p = _probability(probability)
    total = sum(max(count, 0) for _, count in ordered)
    if total == 0:
        return None
    rank, seen = max(math.ceil(p * total), 1), 0
    for value, count in ordered:
        seen += max(count, 0)
        if seen >= rank:
            return value
    raise AssertionError("unreachable: the rank is at most the total")


def weighted_waits(waits: Iterable[tuple[float, int]]) -> tuple[int, float, float, float] | None:
    """The summary the lab prints of waits in seconds that repeat: ``(copies, p50, p95, max)``
    over ``(seconds, count)`` pairs in any order, by ``weighted_nearest_rank``, each rounded to
    the microsecond. Pairs with a count of 0 or less stand for none; ``None`` when none is left."""
    ordered = sorted((seconds, count) for seconds, count in waits if count > 0)
    if not ordered:
        return None
    p50, p95 = (round(weighted_nearest_rank(ordered, p), 6) for p in ("0.5", "0.95"))
    return sum(count for _, count in ordered), p50, p95, round(ordered[-1][0], 6)


def rank_sql(count: str, probability: Decimal | str | float) -> str:
    """``nearest_rank``'s 1-based rank as a Spark SQL expression over the column ``count`` (the
    number of values): ``ceil(p * count)``, at least 1, in integer arithmetic (``p = a / b``)."""
    numerator, denominator = _probability(probability).as_integer_ratio()
    return f"greatest(1, ({numerator} * {count} + {denominator - 1}) div {denominator})"


@dataclass(frozen=True)
class Explanation:
    """The part of ``truth - stream`` one reason accounts for."""

    reason: str
    events: int
    money: Decimal


@dataclass(frozen=True)
class Lateness:
    events: int
    p50: Decimal | None = None
    p99: Decimal | None = None
    p99_9: Decimal | None = None
    max: Decimal | None = None

    @classmethod
    def of(cls, seconds: list[Decimal]) -> Lateness:
        ordered = sorted(seconds)
        return cls(
            events=len(ordered),
            p50=nearest_rank(ordered, "0.5"),
            p99=nearest_rank(ordered, "0.99"),
            p99_9=nearest_rank(ordered, "0.999"),
            max=ordered[-1] if ordered else None,
        )


@dataclass(frozen=True)
class CurrencyReconciliation:
    """One currency's figures over the compared windows."""

    currency: str
    windows_compared: int
    status_counts: dict[str, int]
    truth_events: int
    stream_events: int
    truth_amount: Decimal
    stream_amount: Decimal
    total_abs_error: Decimal
    max_rel_error: Decimal | None
    late_events: int
    late_amount: Decimal
    lateness: Lateness
    explained: tuple[Explanation, ...]
    unexplained_windows: int
    unexplained_events: int
    unexplained_money: Decimal
    corrected_windows_compared: int
    corrected_windows_matched: int
    corrected_explained: tuple[Explanation, ...] = ()
    corrected_unexplained_events: int = 0
    corrected_unexplained_money: Decimal = Decimal(0)

    @property
    def windows_matched(self) -> int:
        return self.status_counts.get("match", 0)

    @property
    def exact_match_rate(self) -> float | None:
        return None if not self.windows_compared else self.windows_matched / self.windows_compared

    @property
    def completeness(self) -> float | None:
        """Stream money / truth money (None when the truth sums to zero)."""
        return None if self.truth_amount == 0 else float(self.stream_amount / self.truth_amount)

    @property
    def corrected_equals_truth(self) -> bool:
        return self.corrected_windows_matched == self.corrected_windows_compared


@dataclass(frozen=True)
class WindowGap:
    """One differing window: both sides, the delta and what explains it."""

    window_start: str
    window_end: str
    account_id: str
    currency: str
    status: str
    truth_events: int | None
    stream_events: int | None
    truth_amount: Decimal | None
    stream_amount: Decimal | None
    events_delta: int
    amount_delta: Decimal
    explained: tuple[Explanation, ...]
    unexplained_events: int
    unexplained_money: Decimal


@dataclass(frozen=True)
class Reconciliation:
    """A reconciliation run of one stream (``speed`` or ``kappa:<RUN>``) against the truth.

    The stream's tables were read as of its micro-batch ``stream_batch`` (``stream_versions``)."""

    run_id: str
    against: str
    days: DayRange
    windows: str
    tolerance: Tolerance
    batch_last_segment: int
    stream_last_segment: int
    currencies: tuple[CurrencyReconciliation, ...]
    stream_batch: int | None = None  # the stream's last completed micro-batch read (None: written in one go)
    stream_versions: tuple[tuple[str, int], ...] = ()  # the Delta version read of each stream table
    largest_gaps: tuple[WindowGap, ...] = ()
    corrections: int = 0
    tables: dict[str, str] = field(default_factory=dict)

    @property
    def unexplained_events(self) -> int:
        """Events neither side's records account for, in the stream's or the corrected figures."""
        return sum(c.unexplained_events + c.corrected_unexplained_events for c in self.currencies)

    @property
    def corrected_equals_truth(self) -> bool:
        return all(c.corrected_equals_truth for c in self.currencies)

    def breaches(self, max_unexplained_money: Decimal = Decimal(0), max_unexplained_events: int = 0) -> list[str]:
        """Why the unexplained gap is over the threshold (empty: within it)."""
        found = []
        for c in self.currencies:
            for what, events, money in (
                ("stream", c.unexplained_events, c.unexplained_money),
                ("corrected", c.corrected_unexplained_events, c.corrected_unexplained_money),
            ):
                if money > max_unexplained_money:
                    found.append(f"{c.currency} {what}: unexplained money {money} exceeds {max_unexplained_money}")
                if events > max_unexplained_events:
                    found.append(f"{c.currency} {what}: {events} unexplained events exceed {max_unexplained_events}")
        return found

"""How late events arrive: the distribution of ``ingest_time - event_time``, kept as quantiles.

A day of traffic has hundreds of thousands of delays; the report keeps their nearest-rank
quantiles (``reconciliation.result.nearest_rank``) at fixed probabilities (every percent, then
the long tail up to the maximum), which is enough to draw the cumulative distribution on a log
scale and to quote p50, p99 and p99.9.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from decimal import Decimal

from reconciliation.result import nearest_rank  # also read from here by tests/test_compare.py

from .validation import check_decimal, freeze

__all__ = ["DelayQuantile", "ArrivalDelay", "nearest_rank"]


@dataclass(frozen=True)
class DelayQuantile:
    """``seconds`` is the smallest delay at least ``probability`` of the events do not exceed."""

    probability: Decimal
    seconds: Decimal

    def __post_init__(self) -> None:
        if not isinstance(self.probability, Decimal) or not 0 < self.probability <= 1:
            raise ValueError(f"probability {self.probability!r}: a Decimal in (0, 1]")
        check_decimal(self.seconds, "seconds")


@dataclass(frozen=True)
class ArrivalDelay:
    """How long events took to arrive, ``ingest_time - event_time`` in exact seconds.

    ``non_positive``: events whose ingest time is not after their event time (clock skew); they
    are in the quantiles, but a log scale cannot draw them. ``quantiles`` ascend by probability.
    """

    events: int
    non_positive: int
    quantiles: tuple[DelayQuantile, ...]

    PROBABILITIES = tuple(Decimal(p) / 100 for p in range(1, 100)) + tuple(
        Decimal(p) for p in ("0.995", "0.999", "0.9999", "1")
    )

    def __post_init__(self) -> None:
        freeze(self, "quantiles", tuple(self.quantiles))
        probabilities = [q.probability for q in self.quantiles]
        if probabilities != sorted(set(probabilities)):
            raise ValueError("arrival delay quantiles must ascend by probability, each once")

    @classmethod
    def of_delays(cls, seconds: Iterable[Decimal]) -> ArrivalDelay:
        """From every event's delay (exact seconds), at ``PROBABILITIES``."""
        ordered = sorted(seconds)
        quantiles = (DelayQuantile(p, nearest_rank(ordered, p)) for p in cls.PROBABILITIES) if ordered else ()
        return cls(events=len(ordered), non_positive=sum(1 for s in ordered if s <= 0), quantiles=tuple(quantiles))

    def at(self, probability: str) -> Decimal | None:
        """The delay at ``probability`` (``"0.99"``), ``None`` when not kept."""
        wanted = Decimal(probability)
        return next((q.seconds for q in self.quantiles if q.probability == wanted), None)

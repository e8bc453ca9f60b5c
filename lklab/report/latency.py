"""How long windows took, per stage, in seconds of processing time after their end.

A window's end is the moment the traffic it covers is over; everything a consumer waits for is
measured from there on the log's clock (``shared.clock``), in exact seconds: 0 when it happened
before the end, ``None`` when it never happened. The summary keeps nearest-rank quantiles over
the windows that got there and counts the others.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from decimal import Decimal

from reconciliation.result import nearest_rank

from .validation import check_decimal

__all__ = ["LatencySummary"]

_LATENCIES = ("first_result", "final", "exact")


@dataclass(frozen=True)
class LatencySummary:
    """Per truth window, seconds of processing time after the window's end (0 when it happened
    before the end), nearest-rank quantiles over the windows that got there (``None`` when none
    did), and how many never did:

    * ``first_result_*`` / ``never_emitted``: until the served answer first holds the window;
    * ``final_*`` / ``never_final``: until the window is declared final (a stream: its watermark
      reached the window's end; processing-time windows: the clock passed the end);
    * ``exact_*`` / ``never_exact``: until the served value equals the truth and keeps it to the
      end of the measurement.

    ``events_when_final`` / ``truth_events`` is the completeness when final: events counted in
    each window's served value at the moment it was declared final (0 for windows never final),
    over events in truth. ``None`` where it does not apply (processing-time windows hold other
    events than the truth's window of the same bounds).
    """

    windows: int
    first_result_p50: Decimal | None
    first_result_p95: Decimal | None
    first_result_max: Decimal | None
    never_emitted: int
    final_p50: Decimal | None
    final_p95: Decimal | None
    final_max: Decimal | None
    never_final: int
    exact_p50: Decimal | None
    exact_p95: Decimal | None
    exact_max: Decimal | None
    never_exact: int
    events_when_final: int | None
    truth_events: int

    def __post_init__(self) -> None:
        for stage in _LATENCIES:
            for quantile in ("p50", "p95", "max"):
                name = f"{stage}_{quantile}"
                if getattr(self, name) is not None:
                    check_decimal(getattr(self, name), name)
        for name in ("never_emitted", "never_final", "never_exact"):
            if not 0 <= getattr(self, name) <= self.windows:
                raise ValueError(f"{name} {getattr(self, name)} outside 0..{self.windows}")

    @classmethod
    def of_windows(
        cls,
        first_result: Iterable[Decimal | None],
        final: Iterable[Decimal | None],
        exact: Iterable[Decimal | None],
        events_when_final: int | None,
        truth_events: int,
    ) -> LatencySummary:
        """From one value per window for each stage (the same windows in the same order; ``None``
        = never)."""
        stages = [list(first_result), list(final), list(exact)]
        if len({len(values) for values in stages}) != 1:
            raise ValueError(f"latencies of different numbers of windows: {[len(v) for v in stages]}")
        figures: dict = {
            "windows": len(stages[0]),
            "events_when_final": events_when_final,
            "truth_events": truth_events,
        }
        for stage, values, never in zip(_LATENCIES, stages, ("never_emitted", "never_final", "never_exact")):
            reached = sorted(v for v in values if v is not None)
            figures[f"{stage}_p50"] = nearest_rank(reached, "0.5")
            figures[f"{stage}_p95"] = nearest_rank(reached, "0.95")
            figures[f"{stage}_max"] = reached[-1] if reached else None
            figures[never] = len(values) - len(reached)
        return cls(**figures)

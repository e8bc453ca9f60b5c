"""What a Lambda-vs-Kappa comparison report shows: numbers only, no formatting.

Every figure is computed from the tables the runs wrote, then frozen here; the renderers
(``html``, ``markdown``, ``summary_json``, ``audit_csv``) only read these objects.

Units and rules that hold throughout:

* Money is ``Decimal`` with at most six decimal places (the lake's ``DECIMAL(38,6)``), always
  per currency: a money figure is a mapping ``{currency: Decimal}``; a currency absent from a
  mapping means zero. Money of different currencies is never added together.
* Times are timezone-aware UTC ``datetime``\\s. *Processing time* is the simulated one: the
  ingest time the log had reached when a micro-batch (or batch recompute) ended.
* Durations measured on the data (latency, lateness, arrival delay) are exact ``Decimal``
  seconds with microsecond resolution; compute cost is ``float`` seconds as measured.
* Windows are half-open ``[window_start, window_end)`` and keyed by
  ``(window_start, window_end, account_id, currency)``.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Literal

from shared.durations import parse_duration

from .arrival import ArrivalDelay, nearest_rank
from .audit import FinanceAudit
from .gaps import GapHeatMap
from .validation import check_decimal, check_per_currency, check_utc, freeze

__all__ = [
    "ARCHITECTURES",
    "PATHS",
    "Configuration",
    "ErrorPoint",
    "LatencySummary",
    "LateSummary",
    "PathCost",
    "ReconciliationSummary",
    "ConfigurationResult",
    "Report",
]

ARCHITECTURES = ("lambda", "kappa")
PATHS = ("speed", "batch", "streaming", "replay")
"""Where compute goes: Lambda's speed layer and daily batch recompute; Kappa's streaming job
(with its allowed lateness) and a full replay of the log (the cost of reprocessing)."""


@dataclass(frozen=True)
class Configuration:
    """One architecture at one setting; durations as the user wrote them (``"10s"``, ``"0"``)."""

    architecture: Literal["lambda", "kappa"]
    watermark_delay: str
    allowed_lateness: str

    def __post_init__(self) -> None:
        if self.architecture not in ARCHITECTURES:
            raise ValueError(f"architecture {self.architecture!r}: use one of {', '.join(ARCHITECTURES)}")
        parse_duration(self.watermark_delay, name="watermark_delay")
        parse_duration(self.allowed_lateness, name="allowed_lateness")

    @property
    def watermark_delay_seconds(self) -> Decimal:
        return Decimal(parse_duration(self.watermark_delay)) / 1_000_000

    @property
    def allowed_lateness_seconds(self) -> Decimal:
        return Decimal(parse_duration(self.allowed_lateness)) / 1_000_000

    @property
    def key(self) -> str:
        """Stable identifier, safe in HTML ids and CSV: ``kappa-w10s-l1h``."""
        return f"{self.architecture}-w{self.watermark_delay}-l{self.allowed_lateness}"

    @property
    def label(self) -> str:
        return f"{self.architecture.capitalize()} W={self.watermark_delay} L={self.allowed_lateness}"


@dataclass(frozen=True)
class ErrorPoint:
    """The served answer against truth at one processing time (after one micro-batch).

    ``windows_wrong``: windows that have ended by ``processing_time`` whose served total differs
    from truth or is missing. ``money_wrong``: the sum over those windows of
    ``|served - truth|``, per currency.
    """

    processing_time: dt.datetime
    windows_wrong: int
    money_wrong: Mapping[str, Decimal]

    def __post_init__(self) -> None:
        check_utc(self.processing_time, "processing_time")
        freeze(self, "money_wrong", check_per_currency(self.money_wrong, "money_wrong"))


@dataclass(frozen=True)
class LatencySummary:
    """Per-window latency, in seconds of processing time after the window's end.

    ``first_result_*``: until the served answer first holds the window; ``exact_*``: until it
    holds exactly the truth and keeps it. Quantiles are nearest-rank over the windows that got
    there (``None`` when none did); ``never_emitted`` and ``never_exact`` count the others.
    ``first_emission_events`` / ``truth_events`` is the completeness at first emission: events
    counted in each window's first served result, over events in truth.
    """

    windows: int
    first_result_p50: Decimal | None
    first_result_p95: Decimal | None
    first_result_max: Decimal | None
    never_emitted: int
    exact_p50: Decimal | None
    exact_p95: Decimal | None
    exact_max: Decimal | None
    never_exact: int
    first_emission_events: int
    truth_events: int

    def __post_init__(self) -> None:
        for name in ("first_result_p50", "first_result_p95", "first_result_max", "exact_p50", "exact_p95", "exact_max"):
            if getattr(self, name) is not None:
                check_decimal(getattr(self, name), name)

    @classmethod
    def of_windows(
        cls,
        first_result: Iterable[Decimal | None],
        exact: Iterable[Decimal | None],
        first_emission_events: int,
        truth_events: int,
    ) -> "LatencySummary":
        """From one value per window (the same windows, in any order; ``None`` = never)."""
        first, right = list(first_result), list(exact)
        if len(first) != len(right):
            raise ValueError(f"{len(first)} first-result latencies but {len(right)} exact latencies")
        got_first = sorted(v for v in first if v is not None)
        got_right = sorted(v for v in right if v is not None)
        return cls(
            windows=len(first),
            first_result_p50=nearest_rank(got_first, "0.5"),
            first_result_p95=nearest_rank(got_first, "0.95"),
            first_result_max=got_first[-1] if got_first else None,
            never_emitted=len(first) - len(got_first),
            exact_p50=nearest_rank(got_right, "0.5"),
            exact_p95=nearest_rank(got_right, "0.95"),
            exact_max=got_right[-1] if got_right else None,
            never_exact=len(right) - len(got_right),
            first_emission_events=first_emission_events,
            truth_events=truth_events,
        )


@dataclass(frozen=True)
class LateSummary:
    """Late events and their gross money (sum of ``|amount|``, per currency).

    ``side_output``: behind the watermark beyond the allowed lateness, written to
    ``late_events`` and left out of the stream's windows. ``absorbed``: late updates the stream
    still applied thanks to the allowed lateness.
    """

    side_output_events: int
    side_output_money: Mapping[str, Decimal]
    absorbed_events: int
    absorbed_money: Mapping[str, Decimal]

    def __post_init__(self) -> None:
        freeze(self, "side_output_money", check_per_currency(self.side_output_money, "side_output_money"))
        freeze(self, "absorbed_money", check_per_currency(self.absorbed_money, "absorbed_money"))


@dataclass(frozen=True)
class PathCost:
    """Compute spent on one path, seconds as measured (CPU = user + system of all processes)."""

    path: Literal["speed", "batch", "streaming", "replay"]
    cpu_seconds: float
    wall_seconds: float

    def __post_init__(self) -> None:
        if self.path not in PATHS:
            raise ValueError(f"path {self.path!r}: use one of {', '.join(PATHS)}")
        if self.cpu_seconds < 0 or self.wall_seconds < 0:
            raise ValueError(f"path {self.path}: negative cost")


@dataclass(frozen=True)
class ReconciliationSummary:
    """The served answer at the end of the run reconciled against batch truth.

    ``served_money`` and ``truth_money``: net totals (signed, exact) over all windows, per
    currency; their ratio is the money completeness. ``unexplained_money``: sum of
    ``|served - truth|`` over windows whose difference no late event, duplicate or dead letter
    explains, per currency. Both unexplained figures must be 0.
    """

    windows_compared: int
    windows_exact: int
    served_money: Mapping[str, Decimal]
    truth_money: Mapping[str, Decimal]
    unexplained_windows: int
    unexplained_money: Mapping[str, Decimal]

    def __post_init__(self) -> None:
        if not 0 <= self.windows_exact <= self.windows_compared:
            raise ValueError(f"windows_exact {self.windows_exact} outside 0..{self.windows_compared}")
        for name in ("served_money", "truth_money", "unexplained_money"):
            freeze(self, name, check_per_currency(getattr(self, name), name))


@dataclass(frozen=True)
class ConfigurationResult:
    """Everything measured for one configuration; ``error_series`` in processing-time order."""

    configuration: Configuration
    error_series: tuple[ErrorPoint, ...]
    latency: LatencySummary
    late: LateSummary
    costs: tuple[PathCost, ...]
    state_rows_max: int
    reconciliation: ReconciliationSummary

    def __post_init__(self) -> None:
        freeze(self, "error_series", tuple(self.error_series))
        freeze(self, "costs", tuple(self.costs))
        times = [p.processing_time for p in self.error_series]
        if times != sorted(times):
            raise ValueError(f"{self.configuration.key}: error_series is not in processing-time order")
        paths = [c.path for c in self.costs]
        if len(paths) != len(set(paths)):
            raise ValueError(f"{self.configuration.key}: a path is costed twice: {paths}")

    def cost(self, path: str) -> PathCost | None:
        return next((c for c in self.costs if c.path == path), None)


@dataclass(frozen=True)
class Report:
    """One comparison run: the log, every configuration's results, the gaps and the audit.

    ``source``: the scenario name, or the path of the existing lake that was measured.
    ``events``: events in the log (first copies: duplicates and dead letters not counted).
    ``cost_scope``: what the CPU seconds cover (``driver and local executors`` or ``driver only``).
    """

    run_id: str
    source: str
    window: str
    generated_at: dt.datetime
    events: int
    arrival_delay: ArrivalDelay
    results: tuple[ConfigurationResult, ...]
    heat_maps: tuple[GapHeatMap, ...]
    audit: FinanceAudit
    cost_scope: str = "driver and local executors"

    def __post_init__(self) -> None:
        check_utc(self.generated_at, "generated_at")
        freeze(self, "results", tuple(self.results))
        freeze(self, "heat_maps", tuple(self.heat_maps))
        if not self.results:
            raise ValueError("a report needs at least one configuration")
        keys = [r.configuration.key for r in self.results]
        if len(keys) != len(set(keys)):
            raise ValueError(f"configurations repeat: {keys}")
        unknown = {h.configuration_key for h in self.heat_maps} | {e.configuration for e in self.audit.events}
        if unknown - set(keys):
            raise ValueError(f"unknown configuration keys {sorted(unknown - set(keys))}; known: {keys}")

    @property
    def configurations(self) -> tuple[Configuration, ...]:
        return tuple(r.configuration for r in self.results)

    def result(self, key: str) -> ConfigurationResult:
        return next(r for r in self.results if r.configuration.key == key)

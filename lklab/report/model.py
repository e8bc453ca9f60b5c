"""What a Lambda-vs-Kappa comparison report shows: numbers only, no formatting.

Every figure is computed from the tables the runs wrote, then frozen here; the renderers
(``html``, ``markdown``, ``summary_json``, ``audit_csv``) only read these objects.

Units and rules that hold throughout:

* Money is ``Decimal`` with at most six decimal places (the lake's ``DECIMAL(38,6)``), always
  per currency: a money figure is a mapping ``{currency: Decimal}``; a currency absent from a
  mapping means zero. Money of different currencies is never added together.
* Times are timezone-aware UTC ``datetime``\\s. *Processing time* is the log's clock
  (``shared.clock``): a line's ingest time made monotone in log order. What a configuration
  serves changes at the processing time of the line that changed it, so every figure measured
  on the data has the resolution of a line, whatever the size of the log's segments.
* Durations measured on the data (latency, lateness, arrival delay) are exact ``Decimal``
  seconds with microsecond resolution; compute cost is ``float`` seconds as measured.
* Windows are half-open ``[window_start, window_end)`` and keyed by
  ``(window_start, window_end, account_id, currency)``.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Literal

from shared.durations import parse_duration

from .arrival import ArrivalDelay
from .audit import FinanceAudit
from .commit_time import CommitTime
from .curve import WatermarkCurve
from .gaps import GapHeatMap
from .latency import LatencySummary
from .scaling import CostScaling
from .validation import check_decision_inputs, check_per_currency, check_utc, freeze

__all__ = [
    "ARCHITECTURES",
    "PATHS",
    "PATH_NAMES",
    "Configuration",
    "ErrorPoint",
    "LatencySummary",
    "LateSummary",
    "PathCost",
    "EndSummary",
    "ReconciliationSummary",
    "ConfigurationResult",
    "StreamRun",
    "Report",
]

ARCHITECTURES = ("lambda", "kappa", "processing-time")
"""``processing-time`` is the naive baseline: windows by arrival (processing) time, no watermark."""
PATHS = ("speed", "batch", "reconciliation", "streaming", "replay")
"""Where compute goes. Lambda: its speed layer, the nightly batch recomputes and the
reconciliation of the speed layer against them. Kappa: its streaming job (with its allowed
lateness) and a full replay of the log (the cost of reprocessing), each measured on its own."""
PATH_NAMES = {
    "speed": "speed layer",
    "batch": "batch recompute",
    "reconciliation": "reconciliation",
    "streaming": "streaming job",
    "replay": "full replay",
}
"""Each path as the reports name it."""


@dataclass(frozen=True)
class Configuration:
    """One architecture at one setting; durations as the user wrote them (``"10s"``, ``"0"``).

    The processing-time baseline has no watermark: both durations are ``"0"``.
    """

    architecture: Literal["lambda", "kappa", "processing-time"]
    watermark_delay: str = "0"
    allowed_lateness: str = "0"

    def __post_init__(self) -> None:
        if self.architecture not in ARCHITECTURES:
            raise ValueError(f"architecture {self.architecture!r}: use one of {', '.join(ARCHITECTURES)}")
        parse_duration(self.watermark_delay, name="watermark_delay")
        parse_duration(self.allowed_lateness, name="allowed_lateness")
        if self.is_baseline and (self.watermark_delay, self.allowed_lateness) != ("0", "0"):
            raise ValueError(
                "processing-time windows have no watermark: give watermark_delay and allowed_lateness as '0'"
            )

    @property
    def is_baseline(self) -> bool:
        return self.architecture == "processing-time"

    @property
    def watermark_delay_seconds(self) -> Decimal:
        return Decimal(parse_duration(self.watermark_delay)) / 1_000_000

    @property
    def allowed_lateness_seconds(self) -> Decimal:
        return Decimal(parse_duration(self.allowed_lateness)) / 1_000_000

    @property
    def key(self) -> str:
        """Stable identifier, safe in HTML ids and CSV: ``kappa-w10s-l1h``, ``processing-time``."""
        if self.is_baseline:
            return self.architecture
        return f"{self.architecture}-w{self.watermark_delay}-l{self.allowed_lateness}"

    @property
    def label(self) -> str:
        if self.is_baseline:
            return "Processing-time windows"
        return f"{self.architecture.capitalize()} W={self.watermark_delay} L={self.allowed_lateness}"


@dataclass(frozen=True)
class ErrorPoint:
    """The served answer against truth at one processing time.

    ``windows_wrong``: windows (of the truth or of the served answer) that have ended by
    ``processing_time`` whose served total differs from truth or is missing. ``money_wrong``:
    the sum over those windows of ``|served - truth|``, per currency (absent: zero).
    """

    processing_time: dt.datetime
    windows_wrong: int
    money_wrong: Mapping[str, Decimal]

    def __post_init__(self) -> None:
        check_utc(self.processing_time, "processing_time")
        freeze(self, "money_wrong", check_per_currency(self.money_wrong, "money_wrong"))


@dataclass(frozen=True)
class LateSummary:
    """Late events, distinct, and their money per currency: absolute (``..._money``: the sum of
    ``|amount|``, how much money arrived late whatever its sign) and net (``..._net``: the signed
    sum, what it does to the totals; the finance audit's figure).

    ``side_output``: behind the watermark beyond the allowed lateness, written to
    ``late_events`` and left out of the stream's windows. ``absorbed``: late updates the stream
    still applied thanks to the allowed lateness (the ``late_update`` rows of its window history).
    """

    side_output_events: int
    side_output_money: Mapping[str, Decimal]
    absorbed_events: int
    absorbed_money: Mapping[str, Decimal]
    side_output_net: Mapping[str, Decimal] = field(default_factory=dict)
    absorbed_net: Mapping[str, Decimal] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name in ("side_output_money", "absorbed_money"):
            freeze(self, name, check_per_currency(getattr(self, name), name))
        for name in ("side_output_net", "absorbed_net"):
            freeze(self, name, {c: Decimal(v) for c, v in getattr(self, name).items()})


@dataclass(frozen=True)
class PathCost:
    """Compute spent on one path, seconds as measured (CPU = user + system of all processes).

    ``scaling``: its CPU split into a fixed part and a part per line of the log, where the run
    measured many sizes (a stream's micro-batches; ``lklab.report.scaling``), else ``None``.
    ``commit_time``: a live run's micro-batches from start to commit
    (``lklab.report.commit_time``), else ``None``."""

    path: Literal["speed", "batch", "reconciliation", "streaming", "replay"]
    cpu_seconds: float
    wall_seconds: float
    scaling: CostScaling | None = None
    commit_time: CommitTime | None = None

    def __post_init__(self) -> None:
        if self.path not in PATHS:
            raise ValueError(f"path {self.path!r}: use one of {', '.join(PATHS)}")
        if self.cpu_seconds < 0 or self.wall_seconds < 0:
            raise ValueError(f"path {self.path}: negative cost")


@dataclass(frozen=True)
class EndSummary:
    """The served answer at processing time ``at`` (the end of the measurement) against truth.

    ``windows_compared``: windows in the truth or in the served answer; ``windows_exact``: those
    served with exactly the truth's count and total. ``served_money`` and ``truth_money``: net
    totals (signed, exact) over all windows, per currency; their ratio is the money completeness.
    """

    at: dt.datetime
    windows_compared: int
    windows_exact: int
    served_money: Mapping[str, Decimal]
    truth_money: Mapping[str, Decimal]

    def __post_init__(self) -> None:
        check_utc(self.at, "at")
        if not 0 <= self.windows_exact <= self.windows_compared:
            raise ValueError(f"windows_exact {self.windows_exact} outside 0..{self.windows_compared}")
        for name in ("served_money", "truth_money"):
            freeze(self, name, check_per_currency(getattr(self, name), name))


@dataclass(frozen=True)
class ReconciliationSummary:
    """``lklab reconcile`` of the configuration's stream (``against``) with batch truth.

    ``unexplained_money``: sum of ``|stream - truth|`` over windows whose difference no late
    event, duplicate or dead letter explains, per currency. Both unexplained figures must be 0.
    """

    against: str
    unexplained_windows: int
    unexplained_money: Mapping[str, Decimal]

    def __post_init__(self) -> None:
        freeze(self, "unexplained_money", check_per_currency(self.unexplained_money, "unexplained_money"))

    @property
    def explained(self) -> bool:
        return self.unexplained_windows == 0 and not any(self.unexplained_money.values())


@dataclass(frozen=True)
class ConfigurationResult:
    """Everything measured for one configuration.

    ``error_series``: in processing-time order, ending at ``end.at``. ``late``, ``state_rows_max``
    (the most state rows the stream held after any segment) and ``reconciliation``: ``None``
    where they do not apply (the processing-time baseline has no stream). ``costs``: the paths
    measured; none for the baseline, which is computed by the measurement, not run as a job.

    The figures must agree: windows exact at the end are the truth's windows minus those never
    exact, and the last error point's wrong windows are the compared windows minus the exact.
    """

    configuration: Configuration
    error_series: tuple[ErrorPoint, ...]
    latency: LatencySummary
    end: EndSummary
    late: LateSummary | None
    costs: tuple[PathCost, ...]
    state_rows_max: int | None
    reconciliation: ReconciliationSummary | None

    def __post_init__(self) -> None:
        key = self.configuration.key
        freeze(self, "error_series", tuple(self.error_series))
        freeze(self, "costs", tuple(self.costs))
        times = [p.processing_time for p in self.error_series]
        if times != sorted(times):
            raise ValueError(f"{key}: error_series is not in processing-time order")
        paths = [c.path for c in self.costs]
        if len(paths) != len(set(paths)):
            raise ValueError(f"{key}: a path is costed twice: {paths}")
        if self.end.windows_exact != self.latency.windows - self.latency.never_exact:
            raise ValueError(
                f"{key}: {self.end.windows_exact} windows exact at the end, but {self.latency.windows} "
                f"truth windows of which {self.latency.never_exact} never exact"
            )
        if self.error_series:
            last = self.error_series[-1]
            if last.processing_time != self.end.at:
                raise ValueError(
                    f"{key}: the error series ends at {last.processing_time}, the measurement at {self.end.at}"
                )
            if last.windows_wrong != self.end.windows_compared - self.end.windows_exact:
                raise ValueError(
                    f"{key}: {last.windows_wrong} windows wrong at the end, but {self.end.windows_compared} "
                    f"compared and {self.end.windows_exact} exact"
                )

    def cost(self, path: str) -> PathCost | None:
        return next((c for c in self.costs if c.path == path), None)

    @property
    def commit_time(self) -> CommitTime | None:
        """The live run's micro-batches from start to commit (``PathCost.commit_time``); None
        without a timed live run."""
        return next((c.commit_time for c in self.costs if c.commit_time is not None), None)


@dataclass(frozen=True)
class StreamRun:
    """One stream setting measured: the live run and the full replay at one watermark delay and
    allowed lateness. The live run read ``segments_per_batch`` segments per micro-batch
    (``micro_batches`` in all); ``windows``: the windows both wrote, checked equal row for row
    (count, total, status, processing time of the last change) before anything was measured."""

    watermark_delay: str
    allowed_lateness: str
    segments_per_batch: int
    micro_batches: int
    windows: int


@dataclass(frozen=True)
class Report:
    """One comparison run: the log, every configuration's results, the gaps and the audit.

    ``source``: the scenario name, or the path of the existing lake that was measured.
    ``events``: events in the log (first copies: duplicates and dead letters not counted).
    ``log_end``: processing time of the log's last line. ``nightly_landings``: when Lambda's
    nightly batch recomputes landed (UTC midnights; each serves the batch's rows for every window
    starting before it). ``error_step``: the error series' sampling step (a duration as written).
    ``cost_scope``: what the CPU seconds cover (``driver and local executors`` or ``driver only``).
    ``target_completeness`` (a fraction) and ``events_per_second``: what the first screen's
    recommendation aims at and the rate it prices each architecture at (``lklab.report.decision``).
    ``watermark_curve``: the exact curve of completeness and lateness per watermark delay, where
    an advisor computed one; ``None`` until then (the swept configurations are drawn alone).
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
    streams: tuple[StreamRun, ...] = ()
    log_end: dt.datetime | None = None
    nightly_landings: tuple[dt.datetime, ...] = ()
    error_step: str = "10s"
    cost_scope: str = "driver and local executors"
    target_completeness: Decimal = Decimal("0.995")
    events_per_second: float = 1000.0
    watermark_curve: WatermarkCurve | None = None

    def __post_init__(self) -> None:
        check_utc(self.generated_at, "generated_at")
        check_decision_inputs(self.target_completeness, self.events_per_second)
        freeze(self, "results", tuple(self.results))
        freeze(self, "heat_maps", tuple(self.heat_maps))
        freeze(self, "streams", tuple(self.streams))
        freeze(self, "nightly_landings", tuple(self.nightly_landings))
        for moment in (self.log_end, *self.nightly_landings):
            if moment is not None:
                check_utc(moment, "log_end / nightly_landings")
        parse_duration(self.error_step, name="error_step")
        if not self.results:
            raise ValueError("a report needs at least one configuration")
        keys = [r.configuration.key for r in self.results]
        if len(keys) != len(set(keys)):
            raise ValueError(f"configurations repeat: {keys}")
        unknown = {h.configuration_key for h in self.heat_maps} | {e.configuration for e in self.audit.events}
        if unknown - set(keys):
            raise ValueError(f"unknown configuration keys {sorted(unknown - set(keys))}; known: {keys}")
        ends = {r.end.at for r in self.results}
        if len(ends) > 1:
            raise ValueError(f"configurations measured to different ends: {sorted(ends)}")

    @property
    def configurations(self) -> tuple[Configuration, ...]:
        return tuple(r.configuration for r in self.results)

    @property
    def end(self) -> dt.datetime:
        """The processing time every "at the end" figure refers to."""
        return self.results[0].end.at

    def result(self, key: str) -> ConfigurationResult:
        return next(r for r in self.results if r.configuration.key == key)

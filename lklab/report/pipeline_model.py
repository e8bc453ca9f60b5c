"""What a Lambda-vs-Kappa comparison of a pipeline other than billing shows: numbers only.

``unique_visitors`` and ``order_payments`` have no money and no billing windows: their outputs
are counted (``lklab.served_outputs``: a distinct count per window and user; matched pairs,
unpaid orders and orphan payments) and each wrong output has a *kind* naming what is wrong with
it. The billing report's ``Configuration`` and ``PathCost`` are reused as they are.

Units: times are timezone-aware UTC ``datetime``\\s of processing time (the log's clock);
latencies exact ``Decimal`` seconds; compute cost ``float`` seconds as measured.

The figures must agree, and the objects check it on construction: per configuration, the
outputs exact at the end (compared minus wrong) are the truth's outputs minus those never exact,
and the last point of the error series is the wrong outputs at the end.
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal

from reconciliation.result import nearest_rank

from .commit_time import CommitTime
from .curve import WatermarkCurve
from .model import Configuration, PathCost
from .validation import check_decision_inputs, check_utc, freeze

__all__ = [
    "LatencyFigure",
    "ErrorCount",
    "PipelineResult",
    "AuditFile",
    "StreamCheck",
    "StateSize",
    "LogSummary",
    "PipelineReport",
]


def _counts(mapping: Mapping[str, int], name: str) -> dict[str, int]:
    if any(not isinstance(v, int) or v < 0 for v in mapping.values()):
        raise ValueError(f"{name}: counts must be non-negative integers, got {dict(mapping)}")
    return {k: v for k, v in mapping.items() if v}


@dataclass(frozen=True)
class LatencyFigure:
    """Seconds of processing time from each truth output's due time until it was served exactly
    right for good (0: before it was due), nearest-rank quantiles over those that got there
    (``None`` when none did); ``never``: the outputs still wrong at the end."""

    outputs: int
    p50: Decimal | None
    p95: Decimal | None
    max: Decimal | None
    never: int

    def __post_init__(self) -> None:
        if not 0 <= self.never <= self.outputs:
            raise ValueError(f"never {self.never} outside 0..{self.outputs}")

    @classmethod
    def of(cls, seconds: Iterable[Decimal | None]) -> LatencyFigure:
        values = list(seconds)
        reached = sorted(v for v in values if v is not None)
        return cls(
            len(values),
            nearest_rank(reached, "0.5"),
            nearest_rank(reached, "0.95"),
            reached[-1] if reached else None,
            len(values) - len(reached),
        )


@dataclass(frozen=True)
class ErrorCount:
    """Outputs due by ``processing_time`` and served with another value than the truth's."""

    processing_time: dt.datetime
    wrong: int

    def __post_init__(self) -> None:
        check_utc(self.processing_time, "processing_time")


@dataclass(frozen=True)
class PipelineResult:
    """Everything measured for one configuration.

    ``compared``: outputs in the truth or served at the end; ``wrong_at_end``: the wrong ones by
    kind (zero kinds left out). ``wrong_before_batch`` (Lambda only): what its speed layer served
    wrong, by kind, the moment before the batch recompute landed. ``latency``: per kind of truth
    output. ``side_output``: late events (or pairs) by kind, left out of the stream's answer;
    ``absorbed``: those on time only thanks to the allowed lateness (None: the pipeline has
    none). ``duplicates``/``dead_letters``: what the stream set aside. ``state_peak`` /
    ``state_final``: the stream's state after its fullest and its last micro-batch.
    ``reconciliation``: the stream's reconciliation against the truth, by its own categories;
    ``unexplained`` must be 0.
    """

    configuration: Configuration
    compared: int
    wrong_at_end: Mapping[str, int]
    wrong_before_batch: Mapping[str, int] | None
    error_series: tuple[ErrorCount, ...]
    latency: Mapping[str, LatencyFigure]
    side_output: Mapping[str, int]
    absorbed: int | None
    duplicates: int
    dead_letters: int
    state_peak: int
    state_final: int
    costs: tuple[PathCost, ...]
    reconciliation: Mapping[str, int]
    unexplained: int

    def __post_init__(self) -> None:
        key = self.configuration.key
        freeze(self, "wrong_at_end", _counts(self.wrong_at_end, "wrong_at_end"))
        if self.wrong_before_batch is not None:
            freeze(self, "wrong_before_batch", _counts(self.wrong_before_batch, "wrong_before_batch"))
        freeze(self, "side_output", _counts(self.side_output, "side_output"))
        freeze(self, "reconciliation", _counts(self.reconciliation, "reconciliation"))
        freeze(self, "latency", dict(self.latency))
        freeze(self, "error_series", tuple(self.error_series))
        freeze(self, "costs", tuple(self.costs))
        exact = self.compared - self.wrong
        reached = sum(f.outputs - f.never for f in self.latency.values())
        if exact != reached:
            raise ValueError(
                f"{key}: {exact} outputs exact at the end ({self.compared} compared, {self.wrong} wrong), "
                f"but {reached} truth outputs exactly right for good"
            )
        if self.error_series and self.error_series[-1].wrong != self.wrong:
            raise ValueError(
                f"{key}: the error series ends at {self.error_series[-1].wrong} wrong, the end at {self.wrong}"
            )
        if self.state_final > self.state_peak:
            raise ValueError(f"{key}: final state {self.state_final} above its peak {self.state_peak}")

    @property
    def wrong(self) -> int:
        return sum(self.wrong_at_end.values())

    def cost(self, path: str) -> PathCost | None:
        return next((c for c in self.costs if c.path == path), None)

    @property
    def commit_time(self) -> CommitTime | None:
        """The live run's micro-batches from start to commit (``PathCost.commit_time``); None
        without a timed live run."""
        return next((c.commit_time for c in self.costs if c.commit_time is not None), None)

    @property
    def cpu_seconds(self) -> float:
        return sum(c.cpu_seconds for c in self.costs)

    @property
    def wall_seconds(self) -> float:
        return sum(c.wall_seconds for c in self.costs)


@dataclass(frozen=True)
class AuditFile:
    """A finance audit CSV the live stream's reconciliation wrote: ``path`` absolute, as it was
    written; ``rows`` below its header."""

    path: str
    rows: int

    def __post_init__(self) -> None:
        if not os.path.isabs(self.path):
            raise ValueError(f"audit path {self.path!r}: give it absolute")
        if self.rows < 0:
            raise ValueError(f"audit rows {self.rows}: must not be negative")


@dataclass(frozen=True)
class StreamCheck:
    """One stream setting run live (``micro_batches`` of ``segments_per_batch`` segments) and
    replayed; ``outputs``: the rows both wrote, checked equal before anything was measured.
    ``audit``: the finance audit of the live stream's reconciliation, where the pipeline has one
    (order_payments: its unpaid orders and late payments)."""

    watermark_delay: str
    allowed_lateness: str
    segments_per_batch: int
    micro_batches: int
    outputs: int
    audit: AuditFile | None = None


@dataclass(frozen=True)
class StateSize:
    """A live stream's state (``unit``: what one entry is) at one state TTL: after its fullest
    and its last micro-batch. Only the state depends on the TTL, never what is served."""

    watermark_delay: str
    allowed_lateness: str
    state_ttl: str
    micro_batches: int
    peak: int
    final: int


@dataclass(frozen=True)
class LogSummary:
    """The log as the batch read it: ``lines = events + duplicates + dead_letters + heartbeats``."""

    lines: int
    events: int
    duplicates: int
    dead_letters: int
    heartbeats: int

    def __post_init__(self) -> None:
        if self.lines != self.events + self.duplicates + self.dead_letters + self.heartbeats:
            raise ValueError(
                f"{self.lines} lines != {self.events} events + {self.duplicates} duplicates + "
                f"{self.dead_letters} dead letters + {self.heartbeats} heartbeats"
            )


@dataclass(frozen=True)
class PipelineReport:
    """One comparison of ``pipeline``: the log, the truth's outputs by kind, every configuration.

    ``rule``: the pipeline's settings in words (windows, join bound). ``due``: what an output's
    due time is, in words. ``log_end``: processing time of the log's last line;
    ``batch_landing``: when Lambda's batch recompute of the whole log landed (the first UTC
    midnight after the log's last line and every output's due time); ``end``: where every "at
    the end" figure is taken. ``state_unit``: what a state entry is. ``target_completeness``,
    ``events_per_second`` and ``watermark_curve``: as billing's ``Report`` has them (the first
    screen's recommendation, its price per day, the advisor's curve where there is one).
    """

    pipeline: str
    run_id: str
    source: str
    rule: str
    due: str
    state_unit: str
    generated_at: dt.datetime
    log: LogSummary
    truth: Mapping[str, int]
    results: tuple[PipelineResult, ...]
    streams: tuple[StreamCheck, ...]
    state_sizes: tuple[StateSize, ...]
    log_end: dt.datetime
    batch_landing: dt.datetime
    end: dt.datetime
    error_step: str
    cost_scope: str
    target_completeness: Decimal = Decimal("0.995")
    events_per_second: float = 1000.0
    watermark_curve: WatermarkCurve | None = None

    def __post_init__(self) -> None:
        check_decision_inputs(self.target_completeness, self.events_per_second)
        if not self.pipeline:
            raise ValueError("pipeline: the name of the pipeline compared is required")
        for name in ("generated_at", "log_end", "batch_landing", "end"):
            check_utc(getattr(self, name), name)
        freeze(self, "truth", _counts(self.truth, "truth"))
        for name in ("results", "streams", "state_sizes"):
            freeze(self, name, tuple(getattr(self, name)))
        if not self.results:
            raise ValueError("a report needs at least one configuration")
        keys = [r.configuration.key for r in self.results]
        if len(keys) != len(set(keys)):
            raise ValueError(f"configurations repeat: {keys}")
        outputs = sum(self.truth.values())
        for result in self.results:
            if sum(f.outputs for f in result.latency.values()) != outputs:
                raise ValueError(
                    f"{result.configuration.key}: latency over {sum(f.outputs for f in result.latency.values())} "
                    f"outputs, the truth has {outputs}"
                )
            if result.error_series and result.error_series[-1].processing_time != self.end:
                raise ValueError(f"{result.configuration.key}: its error series does not end at the end {self.end}")

    def result(self, key: str) -> PipelineResult:
        return next(r for r in self.results if r.configuration.key == key)

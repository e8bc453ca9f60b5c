"""How a path's compute grows with the log: a fixed part and a part per line, measured apart.

A run of 3,000 events costs mostly what any run costs (a Spark job started, a micro-batch
planned and committed); only the rest grows with the log. A stream's micro-batches read
different numbers of lines, and each records its lines and how long its step took
(``stream_metrics``: ``input_lines``, ``duration_seconds``), so one run gives many sizes. A
least-squares line over them,

    step seconds of a micro-batch = a + b × its lines,

says which share of the steps' time grows with the lines: ``b × lines / Σ step seconds``
(between 0 and 1). That share of the path's measured CPU is its cost per line; the rest is its
fixed cost (start-up, the per-micro-batch overhead, the commits, which the steps do not time):

    cpu_seconds_per_line = share × cpu_seconds / lines
    fixed_cpu_seconds    = cpu_seconds − cpu_seconds_per_line × lines

``per_line_stderr`` is the slope's standard error carried through the same conversion (``None``
with fewer than three micro-batches). A line is a line of the log: an event, a duplicate, a
dead letter or a heartbeat.

A path run whole (a batch) is timed as a whole: runs over different prefixes of the log (the
nightly recomputes, a run over the first half of the segments) give one point each,
``(lines read, CPU seconds)``, and a least-squares line over them is the split itself:

    CPU seconds of a run = fixed_cpu_seconds + cpu_seconds_per_line × its lines

with both parts kept at zero or above (a negative intercept: the line through the origin,
``b = Σ n·c / Σ n²``; a falling line: all fixed, the runs' mean). Two runs give the line through
both; ``per_line_stderr``, the slope's standard error, needs three. A path measured at one size
only has no scaling: its fixed and per-line parts cannot be told apart.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["CostScaling", "fit_micro_batches", "fit_runs", "MICRO_BATCHES", "MILLION", "RUNS"]

MILLION = 1_000_000
MICRO_BATCHES, RUNS = "micro-batches", "runs"  # what a scaling's points are


@dataclass(frozen=True)
class CostScaling:
    """A path's CPU seconds as ``fixed_cpu_seconds + cpu_seconds_per_line × lines``, fitted over
    ``points`` of ``over`` (``MICRO_BATCHES`` of one run, or whole ``RUNS``) that read ``lines``
    lines in all (see the module docstring)."""

    lines: int
    points: int
    fixed_cpu_seconds: float
    cpu_seconds_per_line: float
    per_line_stderr: float | None = None
    over: str = MICRO_BATCHES

    def __post_init__(self) -> None:
        if self.lines <= 0 or self.points <= 0:
            raise ValueError(f"a scaling needs lines and points, got {self.lines} and {self.points}")
        if self.over not in (MICRO_BATCHES, RUNS):
            raise ValueError(f"over: {self.over!r} is not valid; valid: {MICRO_BATCHES}, {RUNS}")
        if self.cpu_seconds_per_line < 0 or self.fixed_cpu_seconds < 0:
            raise ValueError("a scaling's fixed and per-line costs are not negative")

    @property
    def per_million_lines(self) -> float:
        return self.cpu_seconds_per_line * MILLION

    @property
    def per_million_stderr(self) -> float | None:
        return None if self.per_line_stderr is None else self.per_line_stderr * MILLION

    def cpu_seconds(self, lines: float) -> float:
        """The CPU seconds the path would take over ``lines`` lines, as one run."""
        return self.fixed_cpu_seconds + self.cpu_seconds_per_line * lines


def fit_micro_batches(cpu_seconds: float, batches: Sequence[tuple[int, float]]) -> CostScaling | None:
    """The scaling of a path that took ``cpu_seconds`` over micro-batches ``(lines, step
    seconds)``; ``None`` when they cannot tell a slope (fewer than two sizes, no time recorded)."""
    timed = [(int(lines), float(seconds)) for lines, seconds in batches if seconds is not None and lines is not None]
    lines = sum(n for n, _ in timed)
    stepped = sum(s for _, s in timed)
    if len({n for n, _ in timed}) < 2 or lines <= 0 or stepped <= 0 or cpu_seconds <= 0:
        return None
    count = len(timed)
    mean_n, mean_s = lines / count, stepped / count
    spread = sum((n - mean_n) ** 2 for n, _ in timed)
    slope = sum((n - mean_n) * (s - mean_s) for n, s in timed) / spread
    share = min(max(slope * lines / stepped, 0.0), 1.0)
    to_cpu = cpu_seconds / stepped  # CPU seconds of the path per second of step time
    per_line = share * cpu_seconds / lines
    stderr = None
    if count > 2:
        intercept = mean_s - slope * mean_n
        residual = sum((s - intercept - slope * n) ** 2 for n, s in timed) / (count - 2)
        stderr = math.sqrt(residual / spread) * to_cpu
    return CostScaling(
        lines=lines,
        points=len(batches),
        fixed_cpu_seconds=max(cpu_seconds - per_line * lines, 0.0),
        cpu_seconds_per_line=per_line,
        per_line_stderr=stderr,
    )


def fit_runs(runs: Sequence[tuple[int, float]]) -> CostScaling | None:
    """The scaling of a path run whole at several sizes: a least-squares line over its runs
    ``(lines read, CPU seconds)``, both parts at zero or above (the module docstring); ``None``
    when the runs read fewer than two sizes."""
    points = [(int(lines), float(seconds)) for lines, seconds in runs]
    if len({n for n, _ in points}) < 2 or any(n < 0 or c < 0 for n, c in points):
        return None
    count = len(points)
    mean_n, mean_c = sum(n for n, _ in points) / count, sum(c for _, c in points) / count
    spread = sum((n - mean_n) ** 2 for n, _ in points)
    slope = sum((n - mean_n) * (c - mean_c) for n, c in points) / spread
    intercept = mean_c - slope * mean_n
    if slope < 0:
        slope, intercept = 0.0, mean_c
    elif intercept < 0:
        slope, intercept = sum(n * c for n, c in points) / sum(n * n for n, _ in points), 0.0
    stderr = None
    if count > 2:
        residual = sum((c - intercept - slope * n) ** 2 for n, c in points) / (count - 2)
        stderr = math.sqrt(residual / spread)
    return CostScaling(
        lines=sum(n for n, _ in points),
        points=count,
        fixed_cpu_seconds=intercept,
        cpu_seconds_per_line=slope,
        per_line_stderr=stderr,
        over=RUNS,
    )

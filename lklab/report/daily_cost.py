"""What a day of each architecture would cost: the daily paths, their split, and how it was measured.

An architecture runs some paths every day (Lambda: its speed layer, the nightly batch and the
reconciliation; Kappa: its streaming job); a full replay is a reprocessing, priced on its own.
At ``events_per_second`` (one line of the log per event), each daily path run once a day:

    CPU per day = Σ split paths (fixed_cpu_seconds + cpu_seconds_per_line × lines per day)
                + Σ paths measured at one size (their CPU on this log, once a day)

Its standard error is the per-line slopes' errors, combined and priced at the lines of a day
(``cpu_per_day_stderr``; only the per-line parts grow with the day). A slope fit through two runs
has no residual to judge it by and adds none: the error is then at least the figure given
(``stderr_complete`` False). On a small log it can be as large as the cost per day itself: the
page shows it beside the figure.

A path is split (``lklab.report.scaling``) over its micro-batches (a stream, a replay walked in
timed micro-batches) or over its runs at different sizes (the nightly batch). The second sum makes
the figure a lower bound. ``cost_method`` says it in words for a report's candidates.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from .model import PATH_NAMES, PathCost
from .scaling import MICRO_BATCHES, MILLION, CostScaling

__all__ = ["DAILY_NAMES", "DAILY_PATHS", "SECONDS_PER_DAY", "cost_method", "daily_costs"]

SECONDS_PER_DAY = 86_400
DAILY_PATHS = {"lambda": ("speed", "batch", "reconciliation"), "kappa": ("streaming",)}
# Each path as the answer names it: the batch it counts is the nightly one.
DAILY_NAMES = {**PATH_NAMES, "batch": "nightly batch"}
# Why a path has no split where it has none: what its runs measured.
_ONE_SIZE = {
    "speed": "its micro-batches read one size or timed no step",
    "streaming": "its micro-batches read one size or timed no step",
    "batch": "the log has one segment, so no first half to run",
    "reconciliation": "one reconciliation per stream setting, over the whole log; a second size would "
    "reconcile every stream again",
    "replay": "computed over the whole log at once, or walked in one micro-batch",
}


def daily_costs(costs: Sequence[PathCost], architecture: str, events_per_second: float) -> dict:
    """``architecture``'s costs as a candidate of the answer carries them (``Candidate``'s cost
    fields, by name): per million lines and per day at ``events_per_second`` over its daily
    paths (the module docstring), the daily paths measured at one size (``unsplit``), the full
    replay's CPU and split, and every path's split (``measured``)."""
    daily = [c for c in costs if c.path in DAILY_PATHS[architecture]]
    split = [c for c in daily if c.scaling is not None]
    lines_per_day = events_per_second * SECONDS_PER_DAY
    replay = next((c for c in costs if c.path == "replay"), None)
    known = {
        "replay_cpu_seconds": None if replay is None else replay.cpu_seconds,
        "replay_scaling": None if replay is None else replay.scaling,
        "measured": tuple((c.path, c.scaling) for c in costs),
    }
    if not split:
        return {"cpu_per_million_lines": None, "cpu_per_million_stderr": None, "cpu_per_day": None,
                "cpu_per_day_stderr": None, "stderr_complete": False,
                "unsplit": tuple(c.path for c in daily), **known}  # fmt: skip
    errors = [c.scaling.per_million_stderr for c in split]
    measured_errors = [e for e in errors if e is not None]
    stderr = sum(e * e for e in measured_errors) ** 0.5 if measured_errors else None
    return {
        "cpu_per_million_lines": sum(c.scaling.per_million_lines for c in split),
        "cpu_per_million_stderr": stderr,
        "cpu_per_day": sum(c.scaling.cpu_seconds(lines_per_day) for c in split)
        + sum(c.cpu_seconds for c in daily if c.scaling is None),
        "cpu_per_day_stderr": None if stderr is None else stderr * lines_per_day / MILLION,
        "stderr_complete": None not in errors,
        "unsplit": tuple(c.path for c in daily if c.scaling is None),
        **known,
    }


def cost_method(measured: Iterable[tuple[str, tuple[tuple[str, CostScaling | None], ...]]]) -> str:
    """How the costs of the candidates ``(architecture, measured)`` were measured (``measured``:
    ``(path, split or None)`` per path costed), and which paths were not split and why."""
    text = (
        "How costs were measured: CPU seconds of each path, split into a fixed part and a part per line of the "
        "log. A stream's split comes from its micro-batches: a least-squares line of their step times over their "
        "lines gives the share of its CPU that grows with the lines (± the slope's standard error); the rest is "
        "fixed (start-up, per-micro-batch overhead, commits). The nightly batch's comes from its runs at "
        "different sizes: a least-squares line of each run's CPU over the lines it read (the recomputes at the "
        "midnights inside the log, else a run over the first half of the segments before the run over the whole "
        "log, a measurement not counted in Lambda's cost; an unmeasured run over the first segment warms the "
        "session before them). A replay walked in timed micro-batches is split as a "
        "stream is."
    )
    kinds: dict[str, set[str]] = {}  # per path: how it was measured ("one size", or its scaling's points)
    measured = list(measured)
    for architecture, paths in measured:
        for path, scaling in paths:
            if path == "replay" or path in DAILY_PATHS[architecture]:
                kinds.setdefault(path, set()).add("one size" if scaling is None else scaling.over)
    splits = []
    for path, hows in kinds.items():
        ways, named = sorted(hows), DAILY_NAMES.get(path, path)
        if ways == ["one size"]:
            splits.append(f"the {named} was measured at one size ({_ONE_SIZE.get(path, 'one run')})")
        elif "one size" in ways:
            splits.append(f"the {named} was split in some configurations and measured at one size in others")
        else:
            over = " or ".join("micro-batches" if w == MICRO_BATCHES else "runs" for w in ways)
            splits.append(f"the {named} was split over its {over}")
    if splits:
        text += " In this report " + "; ".join(splits) + "."
    flat: dict[str, list[int]] = {}  # per path: [configurations where its line fell, configurations costing it]
    for _, paths in measured:
        for path, scaling in paths:
            counts = flat.setdefault(path, [0, 0])
            counts[0] += scaling is not None and scaling.cpu_seconds_per_line == 0
            counts[1] += 1
    fell = [f"the {DAILY_NAMES.get(p, p)} in {n} of {m}" for p, (n, m) in flat.items() if n]
    if fell:
        text += (
            " Where a line falls (the smaller runs or micro-batches cost as much or more, e.g. a path's first run "
            "paying the session's warm-up), the path counts as all fixed: here " + ", ".join(fell) + " configurations."
        )
    text += (
        " Per day: the paths run every day (Lambda: speed layer, nightly batch, reconciliation; Kappa: streaming "
        "job), each once a day, one line per event; a path measured at one size counts once a day at its cost on "
        "this log, so that figure is a lower bound (“≥”, “at least”). A ± is the standard error of the per-line "
        "slopes, carried to the figure (per day: times the lines of a day); “± ≥” where a path fit through two "
        "runs adds an error no run measured."
    )
    return text

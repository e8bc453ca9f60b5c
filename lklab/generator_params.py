"""What every log generator's parameters share: how ``lklab generate``'s options fill them, and
the checks they pass on construction.

Each pipeline's generator (``lklab.pipelines.<name>.generator``) takes a frozen parameters
dataclass. ``from_request`` fills it from the command's options (a
``lklab.pipelines.contract.GenerateRequest``) by field name, so a pipeline's ``generate`` job
names only the fields it calls otherwise (``views`` for ``events``). The ``require_*`` checks
reject its bad values with a message naming the option as the command line spells it
(``duplicate-rate``) and the value given.
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar, TypeVar

from lklab.scenarios import EPOCH_START, SCENARIOS, SECOND

__all__ = [
    "LogParams",
    "ScenarioLogParams",
    "from_request",
    "require_counts",
    "require_fractions",
    "require_timing",
    "require_scenario_log",
]

P = TypeVar("P")


def from_request(params_type: type[P], request: object, **renamed: str) -> P:
    """``params_type`` with each field set to the request's field of the same name, or of the
    name ``renamed`` maps it to (``views="events"``: the log's views are the request's events).
    A field the request has nothing for keeps its default; the request's fields no parameter
    takes (``overwrite``, ``accounts`` where there are none) are left out. A ``renamed`` key that
    is no parameter, or a value that is no field of the request, is a ``TypeError``."""
    wanted = [field.name for field in dataclasses.fields(params_type)]
    given = {field.name for field in dataclasses.fields(request)}
    wrong = sorted(
        f"{name}={source!r}" for name, source in renamed.items() if name not in wanted or source not in given
    )
    if wrong:
        raise TypeError(f"{params_type.__name__}: {', '.join(wrong)} names no parameter or no option of the request")
    sources = {name: renamed.get(name, name) for name in wanted}
    return params_type(**{name: getattr(request, source) for name, source in sources.items() if source in given})


def require_counts(params: object, *names: str) -> None:
    """Each of ``names`` is a count of at least 1."""
    for name in names:
        if getattr(params, name) < 1:
            raise ValueError(f"{name} must be at least 1, got {getattr(params, name)}")


def require_fractions(params: object, *names: str) -> None:
    """Each of ``names`` is a share or rate between 0 and 1 (both included)."""
    for name in names:
        if not 0 <= getattr(params, name) <= 1:
            raise ValueError(f"{name.replace('_', '-')} must be between 0 and 1, got {getattr(params, name)}")


def require_timing(params: object) -> None:
    """``span`` is at least a second and ``segment_interval`` at least a millisecond (microseconds)."""
    if params.span < SECOND or params.segment_interval < 1000:
        raise ValueError("span must be at least 1s and segment-interval at least 1ms")


def require_scenario_log(params: object, *counts: str) -> None:
    """The checks of a scenario log's parameters (``lklab.scenarios``, as billing's and
    unique_visitors' generators draw one): ``scenario`` is one of ``SCENARIOS``, each of
    ``counts`` at least 1, ``duplicate_rate`` and ``malformed_rate`` fractions, the timing sound."""
    if params.scenario not in SCENARIOS:
        raise ValueError(f"scenario {params.scenario!r} is unknown; valid: {', '.join(SCENARIOS)}")
    require_counts(params, *counts)
    require_fractions(params, "duplicate_rate", "malformed_rate")
    require_timing(params)


@dataclasses.dataclass(frozen=True)
class LogParams:
    """The parameters of every generated log: the seed, the rate of malformed lines and how much
    ingest time (microseconds) one segment holds. A pipeline's parameters extend it with what it
    draws, name in ``counts`` the fields that must be at least 1 and in ``fractions`` the shares
    and rates (between 0 and 1) checked on construction, and redeclare a field to give it
    another default."""

    counts: ClassVar[tuple[str, ...]] = ()
    fractions: ClassVar[tuple[str, ...]] = ("malformed_rate",)

    seed: int = 7
    malformed_rate: float = 0.001
    segment_interval: int = 60 * SECOND

    def __post_init__(self) -> None:
        require_counts(self, *self.counts)
        require_fractions(self, *self.fractions)


@dataclasses.dataclass(frozen=True)
class ScenarioLogParams(LogParams):
    """The parameters of every log drawn from one of ``lklab.scenarios``: which scenario, the span
    of event time from ``start`` (microseconds) and the rate of exact resends, besides
    ``LogParams``'."""

    scenario: str = "billing"
    start: int = EPOCH_START
    span: int = 6 * 3600 * SECOND
    duplicate_rate: float = 0.01

    def __post_init__(self) -> None:
        require_scenario_log(self, *self.counts)

"""The checks every log generator's parameters pass on construction.

``lklab.pipelines.billing_windows.generator`` (billing), ``lklab.pipelines.unique_visitors.generator`` and ``lklab.pipelines.order_payments.generator``
each take a frozen parameters object; these reject its bad values with a message naming the
option as the command line spells it (``duplicate-rate``) and the value given.
"""

from __future__ import annotations

from lklab.scenarios import SCENARIOS, SECOND

__all__ = ["require_counts", "require_fractions", "require_timing", "require_scenario_log"]


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

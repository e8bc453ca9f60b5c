"""Why two tables differ at a key: reasons found outside both tables, matched exactly to its delta.

A **reason** is something that makes a stream table differ from its truth table at some keys by
an amount known from elsewhere (a pipeline's log, say): per key, one exact value per measure. It
is ``MISSING`` (the stream lacks what the reason holds, so it adds ``-amount`` to the key's
``delta = stream - truth``) or ``EXTRA`` (the stream counted it: ``+amount``).

A key that differs is **explained** by the smallest set of reasons, each holding the key, whose
signed amounts add up to its delta exactly, for every measure::

    delta[m] == sum(amount[r][m] for r in EXTRA reasons) - sum(amount[r][m] for r in MISSING reasons)

Integers add as integers and decimals as ``Decimal`` (``0.300 == 0.3``; nothing is rounded, no
float is involved), and a measure a reason does not hold adds zero. A set of more than one reason
is a **combination** (late events and unread segments, say). The key is **unexplained** when no
set adds up, when it is held by no reason, or when two different sets of that smallest size add
up (the amounts cannot tell which happened: both are listed as ``candidates``).

This module knows no pipeline: the caller names the reasons, finds their amounts and gives each
differing key's values as its ``key_columns`` are matched (``DifferingKey.match``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from itertools import combinations

__all__ = [
    "MISSING",
    "EXTRA",
    "DIRECTIONS",
    "GapReason",
    "GapReasons",
    "DifferingKey",
    "KeyVerdict",
    "GapExplanation",
    "explain",
]

MISSING, EXTRA = "missing", "extra"
DIRECTIONS = (MISSING, EXTRA)
LISTED = 50  # keys listed in a GapExplanation, the unexplained first

Number = int | Decimal


@dataclass(frozen=True)
class GapReason:
    """One reason: ``name`` (a JSON field, e.g. ``late_events``), ``direction`` (``MISSING`` from
    the stream or ``EXTRA`` in it), ``meaning`` (how the text names it) and ``amounts``: per
    matched key, per measure, an exact amount (int or Decimal; a measure left out is zero)."""

    name: str
    direction: str
    meaning: str
    amounts: Mapping[tuple, Mapping[str, Number]]

    def __post_init__(self) -> None:
        if self.direction not in DIRECTIONS:
            raise ValueError(f"reason {self.name}: direction {self.direction!r}; valid: {', '.join(DIRECTIONS)}")

    def signed(self, key: tuple, measure: str) -> Number:
        """What the reason adds to ``delta = stream - truth`` of ``measure`` at ``key``."""
        amount = self.amounts[key].get(measure, 0)
        return -amount if self.direction == MISSING else amount


@dataclass(frozen=True)
class GapReasons:
    """The reasons a source gives, in the order they are tried and reported. ``key_columns``:
    the columns whose values, in that order, make a reason's key (``instants``: those of them
    that hold a moment, matched as UTC microseconds); ``source``: JSON-ready facts about where
    the reasons come from (they make part of the run's identity); ``describe``: the same in
    words."""

    describe: str
    source: dict
    key_columns: tuple[str, ...]
    reasons: tuple[GapReason, ...]
    instants: tuple[str, ...] = ()

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(r.name for r in self.reasons)


@dataclass(frozen=True)
class DifferingKey:
    """A key that differs: ``match``, its values as the reasons' keys hold them (in
    ``GapReasons.key_columns`` order); ``key``, as the report shows it (column to text);
    ``status``; ``delta``, ``stream - truth`` per measure (a null or an absent side as zero)."""

    match: tuple
    key: dict[str, str]
    status: str
    delta: dict[str, Number]


@dataclass(frozen=True)
class KeyVerdict:
    """A differing key and the reasons that explain it (``reasons`` empty: unexplained;
    ``candidates``: the sets of reasons that added up equally well, when there were several)."""

    key: dict[str, str]
    status: str
    delta: dict[str, Number]
    reasons: tuple[str, ...]
    candidates: tuple[tuple[str, ...], ...] = ()

    @property
    def explained(self) -> bool:
        return bool(self.reasons)


@dataclass(frozen=True)
class GapExplanation:
    """Every differing key judged: per reason, how many keys it explains (alone or in a
    combination); how many keys are explained, how many by a combination, how many are not;
    per measure ``sum |delta|`` over the unexplained keys; and ``keys``, at most ``LISTED`` of
    them (the unexplained first, then in key order)."""

    describe: str
    source: dict
    explained_by: dict[str, int]
    explained_keys: int
    combined_keys: int
    unexplained_keys: int
    unexplained_abs_delta: dict[str, Number]
    keys: tuple[KeyVerdict, ...] = field(default=())


def _adds_up(found: tuple[GapReason, ...], gap: DifferingKey) -> bool:
    return all(sum((r.signed(gap.match, m) for r in found), 0) == delta for m, delta in gap.delta.items())


def _verdict(gap: DifferingKey, reasons: tuple[GapReason, ...]) -> KeyVerdict:
    holding = tuple(r for r in reasons if gap.match in r.amounts)
    for size in range(1, len(holding) + 1):
        sets = [tuple(r.name for r in found) for found in combinations(holding, size) if _adds_up(found, gap)]
        if len(sets) == 1:
            return KeyVerdict(gap.key, gap.status, gap.delta, sets[0])
        if sets:
            return KeyVerdict(gap.key, gap.status, gap.delta, (), tuple(sets))
    return KeyVerdict(gap.key, gap.status, gap.delta, ())


def _in_key_order(verdict: KeyVerdict) -> tuple[str, ...]:
    return tuple(verdict.key.values())


def explain(differing: Iterable[DifferingKey], reasons: GapReasons, measures: Iterable[str]) -> GapExplanation:
    """Judge every differing key (the module docstring); ``measures``: the compared ones, in
    report order (every ``DifferingKey.delta`` holds each)."""
    measures = tuple(measures)
    verdicts = [_verdict(gap, reasons.reasons) for gap in differing]
    explained = [v for v in verdicts if v.explained]
    unexplained = [v for v in verdicts if not v.explained]
    # the zero of each measure's own type: a decimal's sum keeps its scale when nothing is unexplained
    zero = {m: next((v.delta[m] * 0 for v in verdicts), 0) for m in measures}
    by_key = sorted(unexplained, key=_in_key_order) + sorted(explained, key=_in_key_order)
    return GapExplanation(
        describe=reasons.describe,
        source=reasons.source,
        explained_by={name: sum(name in v.reasons for v in explained) for name in reasons.names},
        explained_keys=len(explained),
        combined_keys=sum(len(v.reasons) > 1 for v in explained),
        unexplained_keys=len(unexplained),
        unexplained_abs_delta={m: sum((abs(v.delta[m]) for v in unexplained), zero[m]) for m in measures},
        keys=tuple(by_key[:LISTED]),
    )

"""What a configuration served, output by output, on the log's clock, against the batch truth.

The figures of ``lklab compare`` for the pipelines whose outputs are not billing windows
(``unique_visitors``: a distinct count per window and user; ``order_payments``: matched pairs,
unpaid orders, orphan payments). Nothing here runs Spark; times are integer microseconds.

**Outputs.** An output is a key (a tuple) with a value: the truth holds one value per key it has;
what a configuration served is, per key, its *timeline*: ``(processing_time, value)`` after each
change, in time order (``None``: nothing served). Every key also has a *due* time: the event
time after which its right answer is settled (a window's end; the close of an order's interval).
Due times are compared with processing times, as the billing comparison compares a window's end
with them (``lklab.pipelines.billing_windows.measure``).

**The figures.** At processing time ``t`` an output is *wrong* when it is due by ``t`` and the
value served at ``t`` differs from the truth's (``None`` where either has none).
``exact_since``: the earliest processing time from which the served value equals the truth to
the end (``None``: wrong at the end), so an output is exact at the end exactly when it has one;
its *latency* is that time minus its due time, 0 when it was right before it was due.

**Lambda.** ``with_landing``: the speed layer's timelines until the batch recompute lands, then
the truth's value for every key (what the recompute serves), ``None`` for a key it lacks.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable, Mapping, Sequence
from decimal import Decimal

__all__ = [
    "Timeline",
    "timelines",
    "value_at",
    "with_landing",
    "wrong_at",
    "error_series",
    "exact_since",
    "latency_seconds",
]

Key = tuple
Timeline = tuple[tuple[int, object], ...]


def timelines(changes: Iterable[tuple[Key, int, object]]) -> dict[Key, Timeline]:
    """Timelines from ``(key, processing_time, value)`` changes in any order; of several changes
    of a key at one processing time the last given stands (the value after that line)."""
    by_key: dict[Key, dict[int, object]] = {}
    for key, moment, value in changes:
        by_key.setdefault(key, {})[int(moment)] = value
    return {key: tuple(sorted(points.items())) for key, points in by_key.items()}


def value_at(timeline: Sequence[tuple[int, object]], moment: int):
    """The value served at ``moment`` (a change at ``moment`` counts), ``None`` before any."""
    index = bisect_right([t for t, _ in timeline], moment)
    return timeline[index - 1][1] if index else None


def with_landing(speed: Mapping[Key, Timeline], truth: Mapping[Key, object], landing: int) -> dict[Key, Timeline]:
    """Lambda's timelines: ``speed`` before ``landing``, the truth's value from it on."""
    served = {}
    for key in speed.keys() | truth.keys():
        before = tuple((t, v) for t, v in speed.get(key, ()) if t < landing)
        served[key] = before + ((landing, truth.get(key)),)
    return served


def wrong_at(
    served: Mapping[Key, Timeline], truth: Mapping[Key, object], due: Mapping[Key, int], moment: int
) -> list[Key]:
    """The keys due by ``moment`` whose served value then differs from the truth's."""
    return sorted(
        (
            key
            for key in served.keys() | truth.keys()
            if due[key] <= moment and value_at(served.get(key, ()), moment) != truth.get(key)
        ),
        key=repr,
    )


def error_series(
    served: Mapping[Key, Timeline], truth: Mapping[Key, object], due: Mapping[Key, int], end: int, step: int
) -> tuple[tuple[int, int], ...]:
    """``(processing_time, outputs wrong)`` on a grid of ``step`` aligned to the epoch, keeping
    the points where the count changes, and always ``end``. ``end`` must be at or after every
    change and due time."""
    happenings: list[tuple[int, int, Key, object]] = []  # (time, 0 due / 1 change, key, value)
    for key in served.keys() | truth.keys():
        happenings.append((due[key], 0, key, None))
        happenings += [(t, 1, key, v) for t, v in served.get(key, ())]
    happenings.sort(key=lambda h: (h[0], h[1]))
    current: dict[Key, object] = {}
    ended: set[Key] = set()
    wrong = 0

    def is_wrong(key: Key) -> bool:
        return key in ended and current.get(key) != truth.get(key)

    points: list[tuple[int, int]] = []
    index = 0
    grid = sorted({-(-h[0] // step) * step for h in happenings if h[0] <= end} | {end})
    for moment in grid:
        while index < len(happenings) and happenings[index][0] <= moment:
            _, is_change, key, value = happenings[index]
            before = is_wrong(key)
            if is_change:
                current[key] = value
            else:
                ended.add(key)
            wrong += is_wrong(key) - before
            index += 1
        if not points or points[-1][1] != wrong or moment == end:
            points.append((moment, wrong))
    return tuple(points)


def exact_since(timeline: Sequence[tuple[int, object]], right) -> int | None:
    """The earliest processing time from which ``timeline`` holds ``right`` to its end."""
    if not timeline or timeline[-1][1] != right:
        return None
    since = timeline[-1][0]
    for moment, value in reversed(timeline):
        if value != right:
            break
        since = moment
    return since


def latency_seconds(
    served: Mapping[Key, Timeline], truth: Mapping[Key, object], due: Mapping[Key, int]
) -> dict[Key, Decimal | None]:
    """Per truth key: seconds from its due time until it was served exactly right for good (0
    when that was before it was due; ``None``: never)."""
    found = {}
    for key, right in truth.items():
        since = exact_since(served.get(key, ()), right)
        found[key] = None if since is None else Decimal(max(0, since - due[key])).scaleb(-6)
    return found

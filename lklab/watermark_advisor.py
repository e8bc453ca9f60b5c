"""The watermark advisor: the whole trade-off of the watermark delay, exact, from one pass over the log.

**The one pass.** A line is judged by ``W = M(T(p)) - watermark_delay``, where ``M(T(p))`` is the
largest event time of the ticks before the line's own (``shared.clock``); it depends on the log
alone, not on the delay. The clock is run once with a delay of 0 (``clock_without_delay``): per
line ``M`` (what it is judged by) and ``M*`` (what ``W*``, the watermark after it, stands for).
Every delay's watermarks then follow by subtraction, and with them every decision of a stream
over fixed windows (tumbling, sliding), for an allowed lateness ``L``:

* an (event, window) pair is **late** (side output) exactly when ``M`` of its line is known and
  ``delay <= M - window_end - L``: ``shared.watermark.is_late`` with ``W = M - delay``;
* a window is **final** at the first line, at or after the first line that counted an event in
  it, with ``M* >= window_end + delay`` (``shared.stream_windows``: the window history declares a
  window final at the line after which ``W*`` reaches its end, never before the line that opened
  it); a window none of whose pairs counted is never final.

So a delay's figures are those of a replay with that delay, not an estimate
(``tests/test_advise_replay.py`` compares them). Each figure costs a pass over the pairs in
NumPy; the log is read and parsed once.

**The figures** of a delay (``Point``), the report's definitions (``lklab.report.latency``):
``late_events``, the side output's rows (late pairs) and ``late_money`` their amounts summed per
currency (or measure), signed; ``time until final``, per window of the truth the seconds of
processing time from its end to the line that made it final (0 when before its end),
nearest-rank median, p95 and maximum over the windows that became final, ``never_final`` the
others (every pair late, or the log ends first); ``events_when_final``, the events a window held
at the processing time it became final (every change at or before that moment, as the report
reads a window history), summed over the windows. ``completeness`` is that over the truth's
events of the windows that became final (windows the log's end leaves open are counted apart, in
``never_final``: otherwise the last windows would cap every delay's completeness); the report's
own ratio is ``events_when_final / truth_events``. Money completeness is the same with absolute
amounts, per currency (or measure).

**Where it is not exact.** Dedup: the stream forgets a first copy ``dedup_horizon`` behind the
watermark, counted from ``max(event_time, W)`` of the first copy; a later copy is a duplicate
while ``max(e_first, M_first - delay) >= M_copy - delay - horizon``. Every copy is recognised at
every delay when ``M_copy - M_first <= horizon``; otherwise only for ``delay >= M_copy -
horizon - e_first``. Below the largest such bound (``Advice.exact_from``) a resend counts as an
event again in the stream and not in the truth: those points are marked ``exact = False``
(replay such a delay to see it). Sessions merge windows line by line, so no subtraction gives
their decisions: the pipelines refuse them (``lklab replay`` at the delays wanted instead).

**The recommendation.** For a target completeness: the smallest delay meeting it, to a
resolution (1s): the first point of the curve that meets it, then a bisection between it and the
point before (completeness grows with the delay but for rare windows opened by a late update,
so the delay found meets the target but a smaller one may too between curve points). For a
latency budget (p95 time until final): the largest delay within it, the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal

import numpy as np

from lklab.progress import progress as track
from reconciliation.result import nearest_rank
from shared.clock import NO_TIME, ClockSettings, ClockState, advance, known
from shared.watermark import is_late

__all__ = [
    "SECOND",
    "Amounts",
    "AdvisorLog",
    "clock_without_delay",
    "Point",
    "Recommendation",
    "Advice",
    "curve_delays",
    "point_at",
    "advise",
]

SECOND = 1_000_000
_NICE_STEPS = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400)


@dataclass(frozen=True)
class Amounts:
    """One currency (or measure) over the pairs: per pair an exact count of ``10**-scale`` units
    (0 where the pair has none of it), int64 or Python ints; summed exactly, never as a float."""

    values: np.ndarray
    scale: int

    def __post_init__(self) -> None:
        values = np.asarray(self.values)
        if values.dtype != object and np.abs(values).max(initial=0) >= (1 << 62) // max(len(values), 1):
            values = values.astype(object)  # a sum of int64 could overflow
        object.__setattr__(self, "values", values)

    def total(self, rows: np.ndarray, absolute: bool = False) -> Decimal:
        chosen = self.values[rows]
        return Decimal(f"{int((np.abs(chosen) if absolute else chosen).sum())}e-{self.scale}")  # exact at any size


def clock_without_delay(keys: np.ndarray, ingest: np.ndarray, event_time: np.ndarray, watermark_interval: int):
    """Per line in log order ``(processing_time, M, M*)``: the clock run with a delay of 0, so a
    delay's ``W`` is ``M - delay`` and ``W*`` is ``M* - delay`` (``NO_TIME``: unknown)."""
    run = advance(ClockState(), ClockSettings(0, watermark_interval), keys, ingest, event_time)
    return run.processing_time, run.watermark, run.watermark_after


@dataclass(frozen=True)
class AdvisorLog:
    """What the advisor needs of a log, whatever the pipeline: built by ``of``.

    Per line in log order: ``processing_time``, ``judged`` (``M``) and ``reached`` (``M*``). Per
    (first copy, window) pair, sorted by window then line: ``pair_line`` (index of its line),
    ``pair_window`` (index into ``window_end``; every window has a pair) and ``amounts`` by currency or measure name
    (``unit`` says which). Per later copy of an id: its line, its first copy's line and event
    time (``copy_line``, ``first_line``, ``first_event_time``). Times in microseconds."""

    processing_time: np.ndarray
    judged: np.ndarray
    reached: np.ndarray
    pair_line: np.ndarray
    pair_window: np.ndarray
    window_end: np.ndarray
    amounts: Mapping[str, Amounts]
    allowed_lateness: int
    dedup_horizon: int
    copy_line: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    first_line: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    first_event_time: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    unit: str = "currency"

    @classmethod
    def of(
        cls,
        *,
        keys: np.ndarray,
        ingest: np.ndarray,
        event_time: np.ndarray,
        watermark_interval: int,
        pair_line: np.ndarray,
        pair_window: np.ndarray,
        window_end: np.ndarray,
        amounts: Mapping[str, Amounts],
        allowed_lateness: int,
        dedup_horizon: int,
        copies: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
        unit: str = "currency",
    ) -> AdvisorLog:
        """From the log's lines (``line_keys`` ascending, ingest and event times, ``NO_TIME``
        where absent or not an event) and the pairs in any order."""
        p, judged, reached = clock_without_delay(keys, ingest, event_time, watermark_interval)
        pair_line, pair_window = np.asarray(pair_line, np.int64), np.asarray(pair_window, np.int64)
        order = np.lexsort((pair_line, pair_window))
        empty = np.zeros(0, np.int64)
        copy_line, first_line, first_time = copies or (empty, empty, empty)
        return cls(
            processing_time=p,
            judged=judged,
            reached=reached,
            pair_line=pair_line[order],
            pair_window=pair_window[order],
            window_end=np.asarray(window_end, np.int64),
            amounts={name: Amounts(np.asarray(a.values)[order], a.scale) for name, a in amounts.items()},
            allowed_lateness=allowed_lateness,
            dedup_horizon=dedup_horizon,
            copy_line=np.asarray(copy_line, np.int64),
            first_line=np.asarray(first_line, np.int64),
            first_event_time=np.asarray(first_time, np.int64),
            unit=unit,
        )

    @property
    def exact_from(self) -> int:
        """The smallest delay from which every later copy is recognised as a duplicate (module docstring)."""
        copy_m, first_m = self.judged[self.copy_line], self.judged[self.first_line]
        forgettable = known(copy_m) & ~(known(first_m) & (copy_m - first_m <= self.dedup_horizon))
        bounds = copy_m[forgettable] - self.dedup_horizon - self.first_event_time[forgettable]
        return max(0, int(bounds.max(initial=0)))

    @property
    def widest(self) -> int:
        """The smallest delay at which no pair arrives behind a final window (nor is late)."""
        m = self.judged[self.pair_line]
        behind = (m - self.window_end[self.pair_window])[known(m)]
        return max(int(behind.max(initial=-1)) + 1, 0)


@dataclass(frozen=True)
class Point:
    """A stream's figures at one ``watermark_delay`` (microseconds): the module docstring.
    Money: ``Decimal`` per currency (or measure); times: exact seconds."""

    watermark_delay: int
    late_events: int
    late_money: Mapping[str, Decimal]
    windows: int
    never_final: int
    truth_events: int
    final_window_events: int
    events_when_final: int
    final_window_money: Mapping[str, Decimal]
    money_when_final: Mapping[str, Decimal]
    final_p50: Decimal | None
    final_p95: Decimal | None
    final_max: Decimal | None
    exact: bool

    @property
    def completeness(self) -> Decimal | None:
        """Events held when final over the truth's events of the windows that became final."""
        return None if not self.final_window_events else Decimal(self.events_when_final) / self.final_window_events

    @property
    def completeness_when_final(self) -> Decimal | None:
        """The report's ratio: events held when final over every event of the truth (a window
        never final holds none), as ``lklab compare`` reports it per configuration."""
        return None if not self.truth_events else Decimal(self.events_when_final) / self.truth_events

    def money_completeness(self, label: str) -> Decimal | None:
        whole = self.final_window_money.get(label, Decimal(0))
        return None if not whole else self.money_when_final.get(label, Decimal(0)) / whole


def _seconds(micros: int | None) -> Decimal | None:
    return None if micros is None else Decimal(f"{int(micros)}e-6")


def point_at(log: AdvisorLog, delay: int, exact_from: int | None = None) -> Point:
    """The figures of a stream with watermark delay ``delay`` over ``log`` (module docstring)."""
    exact_from = log.exact_from if exact_from is None else exact_from
    lines, windows = len(log.processing_time), len(log.window_end)
    pair_end = log.window_end[log.pair_window]
    judged = log.judged[log.pair_line]
    late = is_late(pair_end, np.where(known(judged), judged - delay, NO_TIME), log.allowed_lateness)
    counted = ~late
    # the line that opened each window: its first pair that counted (``lines``: none did); the
    # pairs are sorted by window and every window has one
    starts = np.searchsorted(log.pair_window, np.arange(windows))
    candidates = np.where(counted, log.pair_line, lines)
    opened = np.minimum.reduceat(candidates, starts) if windows else np.zeros(0, np.int64)
    reaching = np.searchsorted(log.reached, log.window_end + delay, side="left")
    final = (opened < lines) & (reaching < lines)
    final_line = np.minimum(np.maximum(opened, reaching), max(lines - 1, 0))
    final_p = np.where(final, log.processing_time[final_line] if lines else NO_TIME, NO_TIME)
    final = final & known(final_p)
    held = counted & final[log.pair_window] & (log.processing_time[log.pair_line] <= final_p[log.pair_window])
    in_final = final[log.pair_window]
    waits = np.sort(np.maximum(final_p[final] - log.window_end[final], 0))
    late_money = {name: a.total(late) for name, a in log.amounts.items()}
    return Point(
        watermark_delay=int(delay),
        late_events=int(late.sum()),
        late_money={name: money for name, money in late_money.items() if money},  # absent: none
        windows=windows,
        never_final=int(windows - final.sum()),
        truth_events=len(log.pair_line),
        final_window_events=int(in_final.sum()),
        events_when_final=int(held.sum()),
        final_window_money={name: a.total(in_final, absolute=True) for name, a in log.amounts.items()},
        money_when_final={name: a.total(held, absolute=True) for name, a in log.amounts.items()},
        final_p50=_seconds(nearest_rank(waits, "0.5")),
        final_p95=_seconds(nearest_rank(waits, "0.95")),
        final_max=_seconds(waits[-1] if len(waits) else None),
        exact=delay >= exact_from,
    )


def curve_delays(log: AdvisorLog, points: int = 40) -> tuple[int, ...]:
    """Evenly spaced delays from 0 past ``log.widest`` (beyond it nothing changes but the wait),
    ``points`` or so, a round number of seconds apart."""
    top = max(log.widest, SECOND)
    step = next((s * SECOND for s in _NICE_STEPS if s * SECOND * points >= top), None)
    if step is None:
        step = -(-top // (points * 86400 * SECOND)) * 86400 * SECOND
    return tuple(range(0, -(-top // step) * step + 1, step))


@dataclass(frozen=True)
class Recommendation:
    """The delay advised (``point``) for ``target`` completeness and/or a ``budget`` on the p95
    time until final (microseconds); ``met``: both hold at it; ``why``: in a sentence."""

    point: Point
    target: Decimal | None
    budget: int | None
    met: bool
    why: str


@dataclass(frozen=True)
class Advice:
    """The trade-off: ``curve`` (ascending delays), the ``points`` asked for by their names as
    given, the ``recommended`` delay (None: nothing asked), and ``exact_from``."""

    allowed_lateness: int
    dedup_horizon: int
    unit: str
    curve: tuple[Point, ...]
    points: Mapping[str, Point]
    recommended: Recommendation | None
    exact_from: int


def _bisect(evaluate: Callable[[int], Point], low: Point, high: Point, good: Callable[[Point], bool], step: int):
    """Between ``low`` and ``high`` (one good, the other not), the good point nearest the bad
    one, to ``step`` microseconds."""
    good_one, bad_one = (low, high) if good(low) else (high, low)
    while abs(good_one.watermark_delay - bad_one.watermark_delay) > step:
        middle = (good_one.watermark_delay + bad_one.watermark_delay) // 2 // step * step
        if middle in (good_one.watermark_delay, bad_one.watermark_delay):
            break
        found = evaluate(middle)
        good_one, bad_one = (found, bad_one) if good(found) else (good_one, found)
    return good_one


def _recommend(curve, evaluate, target: Decimal | None, budget: int | None, resolution: int):
    if target is None and budget is None:
        return None
    reaches = lambda p: p.completeness is not None and p.completeness >= target
    within = lambda p: p.final_p95 is not None and p.final_p95 <= _seconds(budget)
    if target is not None:
        index = next((i for i, p in enumerate(curve) if reaches(p)), None)
        if index is None:
            best = max(curve, key=lambda p: p.completeness or 0)
            return Recommendation(best, target, budget, False, "no delay reaches the target completeness")
        point = curve[0] if index == 0 else _bisect(evaluate, curve[index - 1], curve[index], reaches, resolution)
        if budget is None or within(point):
            return Recommendation(point, target, budget, True, "the smallest delay that reaches the target")
        return Recommendation(point, target, budget, False, "the target needs a p95 time until final above the budget")
    index = max((i for i, p in enumerate(curve) if within(p)), default=None)
    if index is None:
        return Recommendation(curve[0], target, budget, False, "no delay keeps the p95 time until final within it")
    point = (
        curve[-1] if index == len(curve) - 1 else _bisect(evaluate, curve[index], curve[index + 1], within, resolution)
    )
    return Recommendation(point, target, budget, True, "the largest delay within the latency budget")


def advise(
    log: AdvisorLog,
    asked: Mapping[str, int] | None = None,
    *,
    target: Decimal | None = None,
    budget: int | None = None,
    points: int = 40,
    resolution: int = SECOND,
) -> Advice:
    """The curve over ``curve_delays``, the ``asked`` delays (name as given -> microseconds) and
    the recommendation for ``target`` completeness (a fraction) and/or ``budget`` (p95 time until
    final, microseconds)."""
    asked = dict(asked or {})
    exact_from = log.exact_from
    computed: dict[int, Point] = {}

    def evaluate(delay: int) -> Point:
        if delay not in computed:
            computed[delay] = point_at(log, delay, exact_from)
        return computed[delay]

    delays = sorted(set(curve_delays(log, points)) | set(asked.values()))
    with track("watermark curve", total=len(delays)) as stage:
        for delay in delays:
            evaluate(delay)
            stage.advance()
    curve = tuple(computed[d] for d in delays)
    return Advice(
        allowed_lateness=log.allowed_lateness,
        dedup_horizon=log.dedup_horizon,
        unit=log.unit,
        curve=curve,
        points={name: computed[delay] for name, delay in asked.items()},
        recommended=_recommend(curve, evaluate, target, budget, resolution),
        exact_from=exact_from,
    )

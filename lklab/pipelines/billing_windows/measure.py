"""What a configuration served, change by change on the log's clock, measured against the truth.

Times here are integer microseconds of *processing time* (``shared.clock``: a line's ingest
time made monotone in log order). A window key is ``(window_start, window_end, account_id,
currency)`` with the bounds in microseconds; a value is ``(event_count, amount_total)``.

**What is served** (``Served``): per window key, the value after each change in time order
(``None``: no row served any more, e.g. a session merged away), and when the window was first
declared final. Three sources:

* a stream (Kappa, and Lambda's speed layer): its ``window_history``; a change is served from
  the processing time of the line that made it, and ``final`` from the line after which the
  watermark reached the window's end;
* Lambda (``with_nightly_batches``): the speed layer's changes until the first nightly batch
  recompute that covers the window lands, then that recompute's row (or none), then each later
  recompute's; a recompute landing at ``M`` covers every window starting before ``M``. Finality
  stays the speed layer's (the watermark's);
* processing-time windows (``served_by_processing_time``): each first copy counted at once in
  the window of its processing time; a window is final when the clock passes its end.

**The figures**, per window of the truth, in seconds after the window's end (0 when it happened
before the end; ``None``: never): *first result*, the first change that serves a value; *final*,
when the window was declared final; *exactly right*, the earliest moment from which the served
value equals the truth to the end of the measurement (so a window is exact at the end exactly
when it has this figure). *Windows wrong* at ``t``: windows of the truth or of the served answer
that have ended by ``t`` and are served with another value than the truth (or not at all);
*money wrong*: the sum of ``|served - truth|`` over them, per currency. The error series samples
these on a grid of a fixed step aligned to the epoch, keeping only the points where they change,
and always the measurement's end.
"""

from __future__ import annotations

import datetime as dt
from bisect import bisect_right
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal

import pyarrow as pa
import pyarrow.compute as pc

from lklab.report import (
    EndSummary,
    ErrorPoint,
    FinalGap,
    LateBillingEvent,
    LatencySummary,
    LateSummary,
)
from shared.aggregation import WINDOW_KEY
from shared.events import UTC_MICROS
from shared.windows import WindowSpec, assign_windows_table, micros

__all__ = [
    "Key",
    "Value",
    "Served",
    "rows_of",
    "served_from_history",
    "served_by_processing_time",
    "with_nightly_batches",
    "latency",
    "error_series",
    "at_end",
    "final_gaps",
    "late_rows",
    "late_summary",
    "to_utc",
    "seconds_after",
]

Key = tuple[int, int, str, str]
Value = tuple[int, Decimal]
Change = tuple[int, "Value | None"]
_CHANGE_ORDER = {"update": 0, "final": 1, "delete": 2}


def to_utc(moment: int) -> dt.datetime:
    """Microseconds since the epoch as a UTC datetime."""
    return dt.datetime(1970, 1, 1, tzinfo=dt.UTC) + dt.timedelta(microseconds=moment)


def seconds_after(moment: int | None, end: int) -> Decimal | None:
    """Exact seconds from ``end`` to ``moment``, 0 when ``moment`` is not after ``end``."""
    return None if moment is None else Decimal(max(0, moment - end)).scaleb(-6)


def _keys(table: pa.Table) -> list[Key]:
    starts, ends = micros(table["window_start"]).tolist(), micros(table["window_end"]).tolist()
    return list(zip(starts, ends, table["account_id"].to_pylist(), table["currency"].to_pylist()))


def rows_of(table: pa.Table) -> dict[Key, Value]:
    """Window rows (``AGGREGATE_COLUMNS``, e.g. ``batch_truth``) by key."""
    return dict(zip(_keys(table), zip(table["event_count"].to_pylist(), table["amount_total"].to_pylist())))


@dataclass(frozen=True)
class Served:
    """Per window key its changes ``(processing time, value after)`` in time order, and when it
    was first declared final (``final_at_end``: every window is final at its end)."""

    changes: Mapping[Key, tuple[Change, ...]]
    finals: Mapping[Key, int] = field(default_factory=dict)
    final_at_end: bool = False

    def final_time(self, key: Key) -> int | None:
        return key[1] if self.final_at_end else self.finals.get(key)

    def value_at(self, key: Key, moment: int) -> Value | None:
        """The value served at ``moment`` (after every change at or before it)."""
        timeline = self.changes.get(key, ())
        index = bisect_right([t for t, _ in timeline], moment)
        return timeline[index - 1][1] if index else None

    def answer_at(self, moment: int) -> dict[Key, Value]:
        """Every window served at ``moment`` with its value."""
        answer = {}
        for key in self.changes:
            value = self.value_at(key, moment)
            if value is not None:
                answer[key] = value
        return answer

    @property
    def last_change(self) -> int | None:
        return max((timeline[-1][0] for timeline in self.changes.values() if timeline), default=None)


def served_from_history(history: pa.Table) -> Served:
    """A stream's ``window_history`` (``shared.stream_windows.HISTORY_SCHEMA``) as ``Served``.

    Rows of a window at the same processing time apply in log order, updates before a final
    marker before a delete (markers and deletes carry no line: nulls sort last).
    """
    order = pa.array([_CHANGE_ORDER[c] for c in history["change"].to_pylist()], pa.int8())
    rows = history.append_column("_order", order).append_column("_p", history["processing_time"].cast(pa.int64()))
    rows = rows.take(
        pc.sort_indices(
            rows,
            sort_keys=[
                *[(k, "ascending") for k in WINDOW_KEY],
                ("_p", "ascending"),
                ("_order", "ascending"),
                ("segment", "ascending"),
                ("line_number", "ascending"),
            ],
        )
    )
    changes: dict[Key, list[Change]] = {}
    finals: dict[Key, int] = {}
    columns = (
        rows["_p"].to_pylist(),
        rows["change"].to_pylist(),
        rows["status"].to_pylist(),
        rows["event_count"].to_pylist(),
        rows["amount_total"].to_pylist(),
    )
    for key, moment, change, status, count, amount in zip(_keys(rows), *columns):
        if status == "final":
            finals.setdefault(key, moment)
        if change != "final":
            changes.setdefault(key, []).append((moment, None if change == "delete" else (count, amount)))
    return Served({k: tuple(v) for k, v in changes.items()}, finals)


def served_by_processing_time(spec: WindowSpec, first_copies: pa.Table) -> Served:
    """Windows by arrival: each first copy (``account_id``, ``currency``, ``amount``,
    ``event_id``, ``processing_time`` and ``line``: microseconds and the line's position) counted
    at its processing time in the window ``spec`` gives that time, as if it were the event time.

    Sessions are the final sessions of the arrivals, growing from their first event: a shorter
    shape of a session always ends after the arrival that extends it, so it never ends while
    served and no figure here depends on it.
    """
    by_arrival = pa.table(
        {
            "event_id": first_copies["event_id"],
            "account_id": first_copies["account_id"],
            "currency": first_copies["currency"],
            "amount": first_copies["amount"],
            "line": first_copies["line"],
            "event_time": first_copies["processing_time"].cast(pa.int64()).cast(UTC_MICROS),
        }
    )
    windowed = assign_windows_table(spec, by_arrival)
    windowed = windowed.take(
        pc.sort_indices(windowed, sort_keys=[*[(k, "ascending") for k in WINDOW_KEY], ("line", "ascending")])
    )
    changes: dict[Key, list[Change]] = {}
    for key, moment, amount in zip(
        _keys(windowed), micros(windowed["event_time"]).tolist(), windowed["amount"].to_pylist()
    ):
        timeline = changes.setdefault(key, [])
        count, total = timeline[-1][1] if timeline else (0, Decimal(0))
        timeline.append((moment, (count + 1, total + amount)))
    return Served({k: tuple(v) for k, v in changes.items()}, final_at_end=True)


def with_nightly_batches(speed: Served, landings: Sequence[tuple[int, Mapping[Key, Value]]]) -> Served:
    """Lambda's answer: ``speed`` overlaid with nightly recomputes, ``(landing time, the
    recompute's rows of every window starting before it)`` in landing order (see the module
    docstring)."""
    keys = set(speed.changes).union(*(rows.keys() for _, rows in landings))
    changes: dict[Key, tuple[Change, ...]] = {}
    for key in keys:
        covering = [(moment, rows.get(key)) for moment, rows in landings if key[0] < moment]
        timeline = speed.changes.get(key, ())
        if covering:
            timeline = tuple(c for c in timeline if c[0] < covering[0][0]) + tuple(covering)
        changes[key] = timeline
    return Served(changes, speed.finals, speed.final_at_end)


def _exact_since(timeline: Sequence[Change], right: Value) -> int | None:
    """The earliest moment from which the value is ``right`` to the end (None: not at the end)."""
    if not timeline or timeline[-1][1] != right:
        return None
    index = len(timeline) - 1
    while index > 0 and timeline[index - 1][1] == right:
        index -= 1
    return timeline[index][0]


def latency(served: Served, truth: Mapping[Key, Value], *, completeness: bool = True) -> LatencySummary:
    """First result, final and exactly right for every window of ``truth`` (module docstring);
    with ``completeness``, the events served in each window when it was declared final."""
    first, final, exact, when_final = [], [], [], 0
    for key, right in truth.items():
        end, timeline = key[1], served.changes.get(key, ())
        first.append(seconds_after(next((t for t, v in timeline if v is not None), None), end))
        closed = served.final_time(key)
        final.append(seconds_after(closed, end))
        if closed is not None:
            value = served.value_at(key, closed)
            when_final += value[0] if value else 0
        exact.append(seconds_after(_exact_since(timeline, right), end))
    return LatencySummary.of_windows(
        first, final, exact, when_final if completeness else None, sum(v[0] for v in truth.values())
    )


def _gap(served: Value | None, right: Value | None) -> tuple[bool, Decimal]:
    """Whether a window is wrong, and ``|served - truth|`` of its money."""
    if served == right:
        return False, Decimal(0)
    return True, abs((right[1] if right else Decimal(0)) - (served[1] if served else Decimal(0)))


def error_series(served: Served, truth: Mapping[Key, Value], end: int, step: int) -> tuple[ErrorPoint, ...]:
    """Windows and money wrong at every ``step`` microseconds (epoch-aligned) where they changed,
    and at ``end``; only what happened by ``end`` counts."""
    happenings: list[tuple[int, Key, bool, Value | None]] = []  # (time, key, is a change, value)
    for key in truth.keys() | served.changes.keys():
        if key[1] <= end:
            happenings.append((key[1], key, False, None))
        happenings += [(t, key, True, v) for t, v in served.changes.get(key, ()) if t <= end]
    happenings.sort(key=lambda h: h[0])
    current: dict[Key, Value | None] = {}
    ended: set[Key] = set()
    wrong, money = 0, {}
    points: list[ErrorPoint] = []

    def account(key: Key, sign: int) -> None:
        nonlocal wrong
        if key in ended:
            is_wrong, gap = _gap(current.get(key), truth.get(key))
            wrong += sign * is_wrong
            money[key[3]] = money.get(key[3], Decimal(0)) + sign * gap

    def sample(moment: int) -> None:
        figures = (wrong, {c: m for c, m in money.items() if m})
        if not points or (points[-1].windows_wrong, dict(points[-1].money_wrong)) != figures:
            points.append(ErrorPoint(to_utc(moment), *figures))

    for index, (moment, key, is_change, value) in enumerate(happenings):
        account(key, -1)
        if is_change:
            current[key] = value
        else:
            ended.add(key)
        account(key, +1)
        following = happenings[index + 1][0] if index + 1 < len(happenings) else None
        if following != moment:
            tick = -(-moment // step) * step
            if tick < end and (following is None or tick < following):
                sample(tick)
    if points and points[-1].processing_time == to_utc(end):
        points.pop()
    figures = (wrong, {c: m for c, m in money.items() if m})
    points.append(ErrorPoint(to_utc(end), *figures))
    return tuple(points)


def at_end(served: Served, truth: Mapping[Key, Value], end: int) -> EndSummary:
    """The answer served at ``end`` against the truth."""
    answer = served.answer_at(end)
    keys = truth.keys() | answer.keys()
    money = lambda rows: {
        c: sum((v[1] for k, v in rows.items() if k[3] == c), Decimal(0)) for c in {k[3] for k in rows}
    }
    return EndSummary(
        at=to_utc(end),
        windows_compared=len(keys),
        windows_exact=sum(1 for k in keys if answer.get(k) == truth.get(k)),
        served_money=money(answer),
        truth_money=money(dict(truth)),
    )


def final_gaps(served: Served, truth: Mapping[Key, Value]) -> dict[str, list[FinalGap]]:
    """Per currency: ``|served - truth|`` of the money of each truth window served with another
    total when it was declared final (windows never final are left out)."""
    cells: dict[str, list[FinalGap]] = {}
    for key, right in truth.items():
        closed = served.final_time(key)
        if closed is None:
            continue
        value = served.value_at(key, closed)
        amount = value[1] if value else Decimal(0)
        if amount != right[1]:
            cells.setdefault(key[3], []).append(
                FinalGap(to_utc(key[0]), to_utc(key[1]), key[2], abs(right[1] - amount))
            )
    return cells


def late_rows(rows: pa.Table, configuration: str, disposition: str) -> list[LateBillingEvent]:
    """Audit rows of late events: a stream's ``late_events`` (lateness as recorded), or the
    ``late_update`` rows of its window history (lateness = the watermark the line was judged by
    minus the event time), in ingest order."""
    if "lateness_seconds" in rows.column_names:
        lateness = rows["lateness_seconds"].to_pylist()
    else:
        lateness = [
            Decimal(w - e).scaleb(-6)
            for w, e in zip(micros(rows["watermark"]).tolist(), micros(rows["event_time"]).tolist())
        ]
    utc = lambda t: t.astimezone(dt.UTC)
    records = sorted(
        zip(rows.to_pylist(), lateness),
        key=lambda r: (r[0]["ingest_time"], r[0]["segment"], r[0]["line_number"], r[0]["window_start"]),
    )
    return [
        LateBillingEvent(
            configuration,
            r["event_id"],
            r["account_id"],
            r["amount"],
            r["currency"],
            utc(r["event_time"]),
            utc(r["ingest_time"]),
            late,
            utc(r["window_start"]),
            utc(r["window_end"]),
            disposition,
        )
        for r, late in records
    ]


def late_summary(side_output: Sequence[LateBillingEvent], absorbed: Sequence[LateBillingEvent]) -> LateSummary:
    """Distinct events of each kind and their money per currency, absolute and net."""

    def totals(events: Sequence[LateBillingEvent], of) -> dict[str, Decimal]:
        money: dict[str, Decimal] = {}
        for event in {e.event_id: e for e in events}.values():
            money[event.currency] = money.get(event.currency, Decimal(0)) + of(event.amount)
        return money

    def distinct(events: Sequence[LateBillingEvent]) -> int:
        return len({e.event_id for e in events})

    return LateSummary(
        distinct(side_output),
        totals(side_output, abs),
        distinct(absorbed),
        totals(absorbed, abs),
        side_output_net=totals(side_output, lambda amount: amount),
        absorbed_net=totals(absorbed, lambda amount: amount),
    )

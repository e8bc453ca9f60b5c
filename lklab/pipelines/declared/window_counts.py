"""The windows of a declared pipeline's stream, per event: fixed windows or sessions.

``declared_step`` (``rule``) judges each first copy of an event, in log order, by the watermark
``W`` of its line, and hands it to the window counts of the declaration's kind:

* **fixed windows** (``FixedCounts``: tumbling, sliding, ``[start, start + size)`` on the
  epoch): each (event, window) pair is judged on its own, **late** when
  ``W >= window_end + allowed_lateness`` (one side-output row per window missed); otherwise the
  window of the event's keys counts it. The changes are the windows a micro-batch counted in.
* **sessions** (``SessionCounts``, ``session-gap``, per the declared keys): the rule of every
  stream that runs sessions (``shared.session_join``): an event whose would-be session
  ``[t, t + gap)`` overlaps a session of its keys still held (``W < end + allowed_lateness``)
  joins it, merging every held session it bridges into one ``[min start, max end)`` whose
  totals are theirs plus the event's, even when ``[t, t + gap)`` itself has closed; one touching
  none is **late** when ``W >= t + gap + allowed_lateness`` (one side-output row, the window
  ``[t, t + gap)``), else it opens ``[t, t + gap)``. A session no longer held is final: it
  keeps its row, and no later event joins it. The changes are the sessions a micro-batch made,
  and a deleting row (``_delete``) for each session the table held that was merged into
  another, so that after every micro-batch the table holds the stream's sessions exactly, never
  one merged away.

Either way a window's totals are ``[event_count, *sums]``, each measure added exactly (a
decimal as ``Decimal``, a long as ``int``), and the state keeps the windows that can still
change: a window or session leaves it once the watermark after the micro-batch reaches its end
plus the allowed lateness (``held``). Every decision reads the line's own watermark and the
windows held, which do not depend on where the log was cut into micro-batches.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

from lklab.pipelines.declared.declaration import Declaration
from lklab.pipelines.declared.tables import empty_totals, window_change_schema, window_row, window_schema
from shared.clock import NO_TIME
from shared.session_join import join_session
from shared.windows import FixedWindows

__all__ = ["FixedCounts", "SessionCounts", "window_counts", "fixed_windows"]

Window = tuple  # (start, end, *keys), times in microseconds


def fixed_windows(d: Declaration, what: str) -> FixedWindows:
    """The declaration's tumbling or sliding windows, or ``ValueError`` saying ``what`` needs them."""
    return d.window.require_fixed(f"[pipelines.{d.name}] window-kind: {what} runs tumbling and sliding windows")


def _add(d: Declaration, totals: list, line: dict) -> None:
    totals[0] += 1
    for j, m in enumerate(d.measures, start=1):
        totals[j] += line[m.name]


class FixedCounts:
    """Tumbling or sliding windows: ``count`` an event into each window that is not late for it
    (the module docstring); ``windows`` the open windows' totals, changed in place."""

    def __init__(self, d: Declaration, windows: dict[Window, list]) -> None:
        self.d, self.window, self.windows, self.changed = d, d.window, windows, set()

    def count(self, line: dict, event_time: int, watermark: int) -> tuple[list[tuple[int, int]], bool]:
        """The windows ``[start, end)`` the event missed, and whether any counted it."""
        missed, counted = [], False
        for start in self.window.starts(event_time):
            end = start + self.window.size
            if watermark != NO_TIME and watermark >= end + self.d.allowed_lateness:
                missed.append((start, end))
                continue
            key = (start, end, *(line[k] for k in self.d.keys))
            _add(self.d, self.windows.setdefault(key, empty_totals(self.d)), line)
            self.changed.add(key)
            counted = True
        return missed, counted

    def changes(self) -> pa.Table:
        """The rows of the windows counted in (``window_schema``)."""
        rows = [window_row(self.d, key, self.windows[key]) for key in sorted(self.changed)]
        return pa.Table.from_pylist(rows, window_schema(self.d))

    def held(self) -> dict[Window, list]:
        return self.windows


@dataclass
class _Session:
    start: int
    end: int
    totals: list


class SessionCounts:
    """Sessions per the declared keys: ``count`` an event into the session it joins or opens, or
    judge it late (the module docstring); ``windows``: the sessions held before the micro-batch."""

    def __init__(self, d: Declaration, windows: dict[Window, list]) -> None:
        self.d = d
        self.sessions: dict[tuple, list[_Session]] = {}
        for (start, end, *keys), totals in sorted(windows.items()):
            self.sessions.setdefault(tuple(keys), []).append(_Session(start, end, list(totals)))
        self.before = set(windows)
        self.made: dict[Window, list] = {}  # sessions made in the micro-batch and not merged since
        self.replaced: set[Window] = set()

    def count(self, line: dict, event_time: int, watermark: int) -> tuple[list[tuple[int, int]], bool]:
        """The would-be session ``[t, t + gap)`` when the event is late (else none), and whether
        a session counted it."""
        keys = tuple(line[k] for k in self.d.keys)
        joined = join_session(
            self.sessions.get(keys, []), event_time, watermark, self.d.window.gap, self.d.allowed_lateness
        )
        if joined.late:
            self.sessions[keys] = joined.held
            return [(joined.start, joined.end)], False
        totals = empty_totals(self.d)
        _add(self.d, totals, line)
        for old in joined.touching:
            totals = [a + b for a, b in zip(totals, old.totals)]
            self.made.pop((old.start, old.end, *keys), None)
            self.replaced.add((old.start, old.end, *keys))
        self.sessions[keys] = [*joined.apart, _Session(joined.start, joined.end, totals)]
        self.made[(joined.start, joined.end, *keys)] = totals
        return [], True

    def changes(self) -> pa.Table:
        """The sessions made (``_delete`` false) and those the table held that were merged into
        another (``_delete`` true), as ``window_change_schema`` rows."""
        merged_away = sorted((self.replaced & self.before) - set(self.made))
        rows = [
            *({**window_row(self.d, key, totals), "_delete": False} for key, totals in sorted(self.made.items())),
            *({**window_row(self.d, key, empty_totals(self.d)), "_delete": True} for key in merged_away),
        ]
        return pa.Table.from_pylist(rows, window_change_schema(self.d))

    def held(self) -> dict[Window, list]:
        return {(s.start, s.end, *keys): s.totals for keys, sessions in self.sessions.items() for s in sessions}


def window_counts(d: Declaration, windows: dict[Window, list]) -> FixedCounts | SessionCounts:
    """The window counts of the declaration's kind over the windows held (changed in place for
    fixed windows; read for sessions)."""
    return d.window.pick(fixed=FixedCounts, merging=SessionCounts)(d, windows)

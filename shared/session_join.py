"""How a stream joins one event to the sessions it holds for the event's key.

A stream judges a session event line by line, against the sessions of its key still held and
the watermark ``W`` its line is judged by (``shared.clock``):

* a session ``[start, end)`` is **held** while ``W < end + allowed_lateness``; once not held it
  is final and keeps its row, and no later event joins it (the watermark never goes back);
* the event at ``t`` would form the session ``[t, t + gap)`` alone; it **touches** a held
  session when the two intervals overlap (``t < end`` and ``t + gap > start``; touching ends
  are not enough, as in ``shared.windows``);
* an event touching a held session **joins** it, merging every held session it bridges into
  ``[min start, max end)``, even when its own ``[t, t + gap)`` has closed;
* an event touching none is **late** when ``W >= t + gap + allowed_lateness`` (its would-be
  session was final before it came), else it opens ``[t, t + gap)``.

Before any event ``W`` is unknown (``NO_TIME``): every session is held and nothing is late.
This is the rule of Spark's, Flink's and Beam's merging session windows (a new event's window
merged with every window it overlaps), judged by the watermark of the line. Every pipeline
whose stream runs sessions calls ``join_session``, so their streams decide alike; what a
session carries (its totals) is the caller's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from shared.clock import NO_TIME

__all__ = ["Session", "SessionJoin", "join_session"]


class Session(Protocol):
    """Anything with the bounds ``[start, end)`` of a session, in microseconds."""

    start: int
    end: int


S = TypeVar("S", bound=Session)


@dataclass(frozen=True)
class SessionJoin(Generic[S]):
    """One event judged against its key's sessions: ``held`` (the sessions still held at the
    line's watermark, in the order given), of which ``touching`` merge with the event into
    ``[start, end)`` and ``apart`` do not; ``late``: no held session touched and its own
    session was already closed (``start`` and ``end`` are then ``[t, t + gap)``)."""

    held: list[S]
    touching: list[S]
    apart: list[S]
    start: int
    end: int
    late: bool


def join_session(
    sessions: Sequence[S], event_time: int, watermark: int, gap: int, allowed_lateness: int
) -> SessionJoin[S]:
    """The event at ``event_time`` judged by ``watermark`` against ``sessions`` (one key's; the
    module docstring). Times in microseconds; ``watermark`` may be ``NO_TIME``."""
    t, w = event_time, watermark
    held = list(sessions) if w == NO_TIME else [s for s in sessions if w < s.end + allowed_lateness]
    touching = [s for s in held if t < s.end and t + gap > s.start]
    apart = [s for s in held if not (t < s.end and t + gap > s.start)]
    return SessionJoin(
        held=held,
        touching=touching,
        apart=apart,
        start=min([t, *(s.start for s in touching)]),
        end=max([t + gap, *(s.end for s in touching)]),
        late=not touching and w != NO_TIME and w >= t + gap + allowed_lateness,
    )

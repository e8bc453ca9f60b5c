"""Reconciling the order-payment join: the stream's matched / unpaid / orphan sets against the truth.

Each side's result is three sets, keyed by log lines ``(segment, line_number)`` so that a
resent copy the stream counted again is told apart from its first copy: matched pairs (the
order's line and the payment's line), unpaid orders and orphan payments (one line each). An
item in the truth's set and not the stream's is ``missing_in_stream``; the reverse is
``extra_in_stream``.

Every difference gets one reason, from what either side recorded about the lines it involves:
the item's own lines and, for an unpaid order or an orphan payment, its partners in either
side's matched pairs (an order the stream calls unpaid because its payment came late involves
that payment). Checked in this order, the first that applies:

* ``unread``: a line lies beyond the last segment one side read;
* ``dead_letter``: one side rejected a line;
* ``duplicate``: one side called a line a later copy (in practice a retry the stream no longer
  recognised, beyond its dedup horizon, counted as a first copy);
* ``late_order`` / ``late_payment``: the stream sent the order / payment to the side output
  (its interval, or the earliest interval it could fall in, had been closed by the watermark
  more than the allowed lateness before). An event the allowed lateness let in is no fate: it
  joined as an on-time one, so it differs from the truth only through another line's fate;
* ``pending``: the stream still holds the event undecided (the watermark has not closed it);
* ``unexplained``: none of these: a lost or invented row, the alarm.

When both sides did what they recorded, nothing is unexplained (``lklab.pipelines.order_payments.rule``: the
stream's pairs are exactly the truth's pairs between on-time first copies).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import pyarrow as pa

__all__ = ["REASONS", "JoinSide", "JoinDifference", "JoinReconciliation", "reconcile_join"]

REASONS = ("unread", "dead_letter", "duplicate", "late_order", "late_payment", "pending", "unexplained")
OUTCOMES = ("matched", "unpaid", "orphan")
Line = tuple[int, int]


def _lines(table: pa.Table | None, prefix: str = "") -> list[Line]:
    if table is None or not table.num_rows:
        return []
    return list(zip(table[f"{prefix}segment"].to_pylist(), table[f"{prefix}line_number"].to_pylist()))


@dataclass(frozen=True)
class JoinSide:
    """What one side recorded: ``matched`` (``MATCH_SCHEMA`` columns), ``unpaid`` and ``orphans``
    (event rows), ``duplicates`` and ``dead_letters`` (rows with ``segment``, ``line_number``),
    the stream's ``late`` side output (event rows with ``kind``) and ``pending`` held events,
    and ``last_segment``, the last segment it read."""

    last_segment: int
    matched: pa.Table
    unpaid: pa.Table
    orphans: pa.Table
    duplicates: pa.Table
    dead_letters: pa.Table
    late: pa.Table | None = None
    pending: pa.Table | None = None

    def pairs(self) -> list[tuple[Line, Line]]:
        return list(zip(_lines(self.matched, "order_"), _lines(self.matched, "payment_")))

    def fates(self) -> dict[Line, str]:
        """The recorded disposition of each line that is not a plain on-time event."""
        fate: dict[Line, str] = {}
        if self.pending is not None:
            fate.update((line, "pending") for line in _lines(self.pending))
        if self.late is not None and self.late.num_rows:
            kinds = self.late["kind"].to_pylist()
            fate.update((line, f"late_{kind}") for line, kind in zip(_lines(self.late), kinds))
        fate.update((line, "duplicate") for line in _lines(self.duplicates))
        fate.update((line, "dead_letter") for line in _lines(self.dead_letters))
        return fate


@dataclass(frozen=True)
class JoinDifference:
    """One item in one side's set and not the other's. ``order_line`` / ``payment_line``:
    ``(segment, line_number)``, None for the side an unpaid or orphan item lacks."""

    outcome: str  # matched | unpaid | orphan
    presence: str  # missing_in_stream | extra_in_stream
    order_line: Line | None
    payment_line: Line | None
    reason: str


@dataclass(frozen=True)
class JoinReconciliation:
    """``counts``: per outcome, ``(truth, stream)`` set sizes; ``differences`` in a fixed order."""

    counts: dict[str, tuple[int, int]]
    differences: tuple[JoinDifference, ...]

    @property
    def by_reason(self) -> dict[str, int]:
        found = Counter(d.reason for d in self.differences)
        return {reason: found[reason] for reason in REASONS if found[reason]}

    @property
    def unexplained(self) -> int:
        return sum(1 for d in self.differences if d.reason == "unexplained")


_FATE_ORDER = ("dead_letter", "duplicate", "late_order", "late_payment", "pending")


def _reason(lines: list[Line], truth: JoinSide, stream: JoinSide, fates: tuple[dict, dict]) -> str:
    nearest = min(truth.last_segment, stream.last_segment)
    if any(segment > nearest for segment, _ in lines):
        return "unread"
    recorded = {fate for line in lines for side in fates if (fate := side.get(line))}
    return next((fate for fate in _FATE_ORDER if fate in recorded), "unexplained")


def reconcile_join(truth: JoinSide, stream: JoinSide) -> JoinReconciliation:
    """Diff the three sets of both sides and give every difference its reason."""
    fates = (truth.fates(), stream.fates())
    partners: dict[Line, set[Line]] = {}
    for side in (truth, stream):
        for order, payment in side.pairs():
            partners.setdefault(order, set()).add(payment)
            partners.setdefault(payment, set()).add(order)
    sets = {
        side: {
            "matched": set(side_.pairs()),
            "unpaid": set(_lines(side_.unpaid)),
            "orphan": set(_lines(side_.orphans)),
        }
        for side, side_ in (("truth", truth), ("stream", stream))
    }
    differences = []
    for outcome in OUTCOMES:
        ours, theirs = sets["truth"][outcome], sets["stream"][outcome]
        for presence, items in (("missing_in_stream", ours - theirs), ("extra_in_stream", theirs - ours)):
            for item in sorted(items):
                if outcome == "matched":
                    order, payment = item
                    lines = [order, payment]
                else:
                    order, payment = (item, None) if outcome == "unpaid" else (None, item)
                    lines = [item, *sorted(partners.get(item, ()))]
                differences.append(
                    JoinDifference(outcome, presence, order, payment, _reason(lines, truth, stream, fates))
                )
    counts = {outcome: (len(sets["truth"][outcome]), len(sets["stream"][outcome])) for outcome in OUTCOMES}
    return JoinReconciliation(counts, tuple(differences))

"""Reconciling the ``unique_visitors`` stream with the truth: member sets, not sums.

A distinct count cannot be corrected by adding the late side output to it: a late view may be
of a URL the window already counted. Reconciliation therefore works on **members**:

* ``corrected`` members of a (window, user) = the URLs the stream counted (its ``members``
  output) united with the URLs of its late side output for that window (``corrected_members``);
* the truth's members come from the whole log (the batch rule, ``lklab.pipelines.unique_visitors.rule``, or the
  generator's oracle, ``lklab.pipelines.unique_visitors.truth``).

``reconcile_distinct`` compares them per (window, user): ``served`` (the count the stream
serves), ``corrected`` and ``truth``, with a ``verdict``: ``match`` (served == truth),
``late`` (served != truth but corrected == truth: the difference is views beyond the allowed
lateness, all in the side output), or ``differs``. Each URL still in one member set and not the
other is named, in ``differences``, by the line that carries it:

* ``unread``: the truth's first view of it is in a segment the stream has not read yet;
* ``dead_letter``: the stream rejected that line (never the case when both paths parse alike);
* ``duplicate``: the stream took the line for a copy of an earlier one, or counted a copy the
  batch knows is a duplicate (a resend beyond the dedup horizon whose payload differs);
* ``unexplained``: none of these; a bug.

``proven`` is True when no difference is left: corrected == truth for every window.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from shared.windows import micros

__all__ = [
    "DIFFERENCE_REASONS",
    "VERDICTS",
    "WINDOWS_SCHEMA",
    "CORRECTED_SCHEMA",
    "MemberDifference",
    "DistinctReconciliation",
    "corrected_members",
    "reconcile_distinct",
]

DIFFERENCE_REASONS = ("unread", "dead_letter", "duplicate", "unexplained")
VERDICTS = ("match", "late", "differs")
_TIME = pa.timestamp("us", tz="UTC")
# ``DistinctReconciliation.windows``: distinct URL counts per (window, user) and the verdict.
WINDOWS_SCHEMA = pa.schema(
    [
        pa.field("window_start", _TIME),
        pa.field("window_end", _TIME),
        pa.field("user_id", pa.string()),
        *[pa.field(name, pa.int64()) for name in ("served", "corrected", "truth")],
        pa.field("verdict", pa.string()),
    ]
)
# ``visitors_corrected``: the windows of each run, with the reasons of their differences
# (comma-separated ``DIFFERENCE_REASONS``, null when none) and the run they belong to.
CORRECTED_SCHEMA = pa.schema([*WINDOWS_SCHEMA, pa.field("reasons", pa.string()), pa.field("run_id", pa.string())])


@dataclass(frozen=True)
class MemberDifference:
    """A URL in one member set of a (window, user) and not the other. ``side``: ``truth_only``
    or ``corrected_only``; ``segment``/``line_number``: the line named (times in microseconds)."""

    window_start: int
    window_end: int
    user_id: str
    url: str
    side: str
    reason: str
    segment: int | None
    line_number: int | None


@dataclass(frozen=True)
class DistinctReconciliation:
    """``windows``: one row per (window, user) in any of the three, with ``served``,
    ``corrected``, ``truth`` (distinct URL counts; 0 where absent) and ``verdict``;
    ``differences``: every member left unexplained by the side output, named."""

    windows: pa.Table
    differences: tuple[MemberDifference, ...]

    @property
    def proven(self) -> bool:
        return not self.differences

    def verdicts(self) -> dict[str, int]:
        found = self.windows["verdict"].to_pylist()
        return {verdict: found.count(verdict) for verdict in VERDICTS}

    def reasons(self) -> dict[str, int]:
        found = [d.reason for d in self.differences]
        return {reason: found.count(reason) for reason in DIFFERENCE_REASONS if reason in found}


def _key_rows(table: pa.Table, *extra: str) -> list[tuple]:
    columns = [
        micros(table["window_start"]),
        micros(table["window_end"]),
        table["user_id"].to_pylist(),
        table["url"].to_pylist(),
    ]
    columns += [table[name].to_pylist() for name in extra]
    return [(int(s), int(e), u, url, *rest) for s, e, u, url, *rest in zip(*columns)]


def corrected_members(members: pa.Table, late: pa.Table) -> dict[tuple, tuple]:
    """``(window_start, window_end, user_id, url) -> (segment, line_number)`` of the first line
    (in log order) carrying it in the stream's members or late side output."""
    found: dict[tuple, tuple] = {}
    for *key, segment, line in _key_rows(members, "segment", "line_number") + _key_rows(late, "segment", "line_number"):
        key = tuple(key)
        if key not in found or (segment, line) < found[key]:
            found[key] = (segment, line)
    return found


def _counts(keys) -> dict[tuple, int]:
    counts: dict[tuple, int] = {}
    for start, end, user, _ in keys:
        counts[(start, end, user)] = counts.get((start, end, user), 0) + 1
    return counts


def reconcile_distinct(
    served: pa.Table,
    members: pa.Table,
    late: pa.Table,
    truth_members: pa.Table,
    *,
    read_through: int,
    dead_letters: pa.Table | None = None,
    stream_duplicates: pa.Table | None = None,
    batch_duplicates: pa.Table | None = None,
) -> DistinctReconciliation:
    """Compare the stream with the truth (see the module docstring).

    ``served``: the stream's window rows as served (one per window: ``distinct_urls``);
    ``members``/``late``: its members and late side output; ``truth_members``: one row per
    truth member, with ``first_segment``/``first_line_number`` when known; ``read_through``: the
    last segment the stream read; ``dead_letters``/``stream_duplicates``: the stream's (with
    ``segment``, ``line_number``); ``batch_duplicates``: the lines the batch found to be later
    copies (``segment``, ``line_number``).
    """
    corrected = corrected_members(members, late)
    has_lines = "first_segment" in truth_members.column_names
    truth_rows = _key_rows(truth_members, *(("first_segment", "first_line_number") if has_lines else ()))
    truth = {tuple(r[:4]): (tuple(r[4:6]) if has_lines else (None, None)) for r in truth_rows}
    lines = lambda t: set() if t is None else set(zip(t["segment"].to_pylist(), t["line_number"].to_pylist()))
    rejected, stream_copies, batch_copies = lines(dead_letters), lines(stream_duplicates), lines(batch_duplicates)

    differences = []
    for key in sorted(truth.keys() - corrected.keys()):
        segment, line = truth[key]
        if segment is not None and segment > read_through:
            reason = "unread"
        elif (segment, line) in rejected:
            reason = "dead_letter"
        elif (segment, line) in stream_copies:
            reason = "duplicate"
        else:
            reason = "unexplained"
        differences.append(MemberDifference(*key, "truth_only", reason, segment, line))
    for key in sorted(corrected.keys() - truth.keys()):
        segment, line = corrected[key]
        reason = "duplicate" if (segment, line) in batch_copies else "unexplained"
        differences.append(MemberDifference(*key, "corrected_only", reason, segment, line))

    served_counts = {
        (int(s), int(e), u): int(n)
        for s, e, u, n in zip(
            micros(served["window_start"]),
            micros(served["window_end"]),
            served["user_id"].to_pylist(),
            served["distinct_urls"].to_pylist(),
        )
    }
    corrected_counts, truth_counts = _counts(corrected), _counts(truth)
    windows = sorted(served_counts.keys() | corrected_counts.keys() | truth_counts.keys())
    trio = np.array(
        [[served_counts.get(w, 0), corrected_counts.get(w, 0), truth_counts.get(w, 0)] for w in windows], dtype=np.int64
    ).reshape(-1, 3)
    differing = {(d.window_start, d.window_end, d.user_id) for d in differences}
    verdict = [
        "differs" if w in differing else "match" if s == t else "late" for w, (s, _, t) in zip(windows, trio.tolist())
    ]
    timestamps = lambda index: pa.array([w[index] for w in windows], pa.int64()).cast(_TIME)
    table = pa.table(
        {
            "window_start": timestamps(0),
            "window_end": timestamps(1),
            "user_id": [w[2] for w in windows],
            "served": trio[:, 0],
            "corrected": trio[:, 1],
            "truth": trio[:, 2],
            "verdict": verdict,
        },
        schema=WINDOWS_SCHEMA,
    )
    return DistinctReconciliation(table, tuple(differences))

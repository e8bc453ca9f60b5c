"""What a declared pipeline's log says about the gaps between two tables the lab did not write.

A team's truth table and stream table of a declared pipeline's windows (``lklab reconcile
--truth-table --stream-table --pipeline NAME``) are compared as any two tables
(``reconciliation.table_reconcile``); this module reads the pipeline's log in the lab's lake,
on the driver, and finds per window ``(window_start, window_end, keys)`` the amounts
(``event_count`` and each measure's exact sum) of four reasons for ``delta = stream - truth``
(``reconciliation.gap_reasons`` matches them to each differing window). The truth is taken to
be the declaration's: every first copy of an event id in the whole log, late or not, counted in
every window holding its event time. The stream is taken to have read segments ``1..S``
(``--stream-read-through S``; without it, the whole log):

* ``late_events`` (missing from the stream): the (event, window) pairs the declaration's stream
  judges late, its rule (``rule.declared_step``) walked over segments ``1..S`` in log order on
  the log's own clock (the declaration's ``watermark-delay``, ``allowed-lateness`` and
  ``dedup-horizon``): what a stream run by the lab at those settings sends to ``NAME_late``.
  The rule's decisions for a line depend only on the lines before it, so they are the same
  whether or not the stream read further.
* ``unread_segments`` (missing): the first copies the truth counts that lie in segments after
  ``S``, in every window holding their event time (only with ``--stream-read-through``).
* ``duplicates`` (extra in the stream): every later copy of an event id in segments ``1..S``
  (the truth's rule: a copy however far from its first is dropped), in every window holding its
  own event time, by its own keys and measures: what a stream that does not deduplicate counts
  beyond the truth. A copy such a stream sent aside as late is counted here too, so its window
  is then unexplained.
* ``dead_letters`` (extra): the lines of segments ``1..S`` the declaration refuses only by a
  rule on values (``value_not_allowed``, ``below_min``, ``above_max``) or by the clock check
  (``event_time_in_future``): their event id, keys, measures and event time still read (the
  declaration without its ``fields`` rules and clock-skew bound parses them), so they can be
  placed in windows: what a stream that does not validate counts beyond the truth. A line that
  is not JSON, lacks a field, or holds a measure that is not a number or does not fit its type
  (``measure_out_of_range``: summing it would round) cannot be placed and explains nothing. The
  direction is the stream's: a truth that counts such lines is not the declaration's truth, and
  its window is unexplained.

``check_columns`` refuses ``--keys``/``--measures`` that are not the declaration's.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import sys
from collections.abc import Iterable, Sequence
from decimal import Decimal

import pyarrow as pa
import pyarrow.compute as pc

from lklab.pipelines.declared.declaration import Declaration
from lklab.pipelines.declared.parse import parse_declared_lines
from lklab.pipelines.declared.rule import DeclaredState, declared_step
from lklab.pipelines.declared.stream import settings_of
from lklab.pipelines.declared.window_counts import fixed_windows
from reconciliation.gap_reasons import EXTRA, MISSING, GapReason, GapReasons
from shared.durations import format_duration
from shared.log_clock import by_line

__all__ = ["EXPLAINING", "REASONS", "key_columns", "measure_columns", "check_columns", "log_lines", "gap_reasons"]

EXPLAINING = "explaining foreign tables from the log"  # the walk over the log runs fixed windows

# name: (direction, how the text names it), in the order they are tried and reported
REASONS = {
    "late_events": (MISSING, "late events (the stream's watermark on the log's clock)"),
    "duplicates": (EXTRA, "duplicates (resent copies counted by the stream)"),
    "dead_letters": (EXTRA, "dead letters (lines the declaration refuses, counted by the stream)"),
    "unread_segments": (MISSING, "unread segments (events past the stream's last segment)"),
}
_TIMES = ("event_time", "window_start", "window_end")


def key_columns(d: Declaration) -> tuple[str, ...]:
    return ("window_start", "window_end", *d.keys)


def measure_columns(d: Declaration) -> tuple[str, ...]:
    return ("event_count", *(m.name for m in d.measures))


def _mismatch(given: Sequence[str], expected: Sequence[str], flag: str, d: Declaration) -> str | None:
    for column in given:
        if column not in expected:
            return f"{flag}: {column!r} is not one of the {d.name} pipeline's; valid: {', '.join(expected)}"
    for column in expected:
        if column not in given:
            return f"{flag} lacks {column!r}: the {d.name} pipeline's are {', '.join(expected)}"
    return None


def check_columns(d: Declaration, keys: Sequence[str], measures: Sequence[str]) -> None:
    """``ValueError`` naming the column when ``keys`` or ``measures`` (any order) are not the
    declaration's windows and keys, its ``event_count`` and measures."""
    problem = _mismatch(keys, key_columns(d), "--keys", d) or _mismatch(measures, measure_columns(d), "--measures", d)
    if problem:
        raise ValueError(problem)


def log_lines(spark, lake: str, d: Declaration, last_segment: int) -> pa.Table:
    """Segments ``1..last_segment`` of the lake's log, as the lab's replay reads them
    (``shared.log_source.raw_log``), in Arrow on the driver."""
    from shared.log_source import raw_log

    return raw_log(spark, lake, last_segment, max_line_bytes=d.max_line_bytes).toArrow()


def _micros(table: pa.Table) -> pa.Table:
    for name in _TIMES:
        if name in table.column_names:
            table = table.set_column(table.column_names.index(name), name, pc.cast(table[name], pa.int64()))
    return table


def _zero(d: Declaration) -> dict:
    return {"event_count": 0, **{m.name: 0 if m.type == "long" else Decimal(0) for m in d.measures}}


class _Amounts(dict):
    """Window key -> the count and each measure's sum of the events placed in it."""

    def __init__(self, d: Declaration) -> None:
        super().__init__()
        self.d = d

    def add(self, key: tuple, event: dict) -> None:
        totals = self.setdefault(key, _zero(self.d))
        totals["event_count"] += 1
        for m in self.d.measures:
            totals[m.name] += event[m.name]

    def add_to_windows(self, events: Iterable[dict]) -> _Amounts:
        window = fixed_windows(self.d, EXPLAINING)
        for event in events:
            for start in window.starts(event["event_time"]):
                self.add((start, start + window.size, *(event[k] for k in self.d.keys)), event)
        return self


def _events(parsed: pa.Table) -> pa.Table:
    return parsed.filter(pc.and_(pc.is_null(parsed["reject_reason"]), pc.invert(parsed["heartbeat"])))


def _late(d: Declaration, read: pa.Table) -> _Amounts:
    # one micro-batch: the rule's decisions do not depend on where micro-batches are cut
    late = _Amounts(d)
    for row in _micros(declared_step(d, read, DeclaredState(), 0).late).to_pylist():
        late.add((row["window_start"], row["window_end"], *(row[k] for k in d.keys)), row)
    return late


def _copies(parsed: pa.Table) -> tuple[list[dict], list[dict]]:
    """The events' first copies and later copies, by event id in log order."""
    seen, first, later = set(), [], []
    for event in _micros(_events(parsed)).to_pylist():
        (later if event["event_id"] in seen else first).append(event)
        seen.add(event["event_id"])
    return first, later


def _readable_dead_letters(d: Declaration, raw: pa.Table, parsed: pa.Table, through: int) -> list[dict]:
    refused = pc.and_(pc.is_valid(parsed["reject_reason"]), pc.less_equal(parsed["segment"], through))
    lenient = dataclasses.replace(d, rules={}, max_clock_skew=sys.maxsize)
    return _micros(_events(parse_declared_lines(lenient, raw.filter(refused)))).to_pylist()


def _digest(d: Declaration) -> str:
    return hashlib.sha256(json.dumps(settings_of(d), sort_keys=True).encode()).hexdigest()[:16]


def gap_reasons(d: Declaration, raw: pa.Table, last_segment: int, read_through: int | None) -> GapReasons:
    """The four reasons' amounts (the module docstring) from ``raw``, the log's lines
    (``log_lines``) through ``last_segment``; ``read_through``: the stream's last segment (None:
    the whole log)."""
    fixed_windows(d, EXPLAINING)
    through = last_segment if read_through is None else read_through
    raw = by_line(raw)
    parsed = parse_declared_lines(d, raw)
    first, later = _copies(parsed)
    found = {
        "late_events": _late(d, parsed.filter(pc.less_equal(parsed["segment"], through))),
        "duplicates": _Amounts(d).add_to_windows(e for e in later if e["segment"] <= through),
        "dead_letters": _Amounts(d).add_to_windows(_readable_dead_letters(d, raw, parsed, through)),
        "unread_segments": _Amounts(d).add_to_windows(e for e in first if e["segment"] > through),
    }
    source = {
        "pipeline": d.name,
        "log_segments": last_segment,
        "stream_read_through": read_through,
        "window": d.window.describe(),
        "watermark_delay": format_duration(d.watermark_delay),
        "allowed_lateness": format_duration(d.allowed_lateness),
        "declaration": _digest(d),
    }
    read = "" if read_through is None else f"; the stream read through segment {read_through}"
    return GapReasons(
        describe=(
            f"the {d.name} pipeline's log (segments 1..{last_segment}, watermark delay "
            f"{source['watermark_delay']}{read})"
        ),
        source=source,
        key_columns=key_columns(d),
        instants=("window_start", "window_end"),
        reasons=tuple(
            GapReason(name, direction, meaning, dict(found[name])) for name, (direction, meaning) in REASONS.items()
        ),
    )

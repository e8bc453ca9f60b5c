"""Whether two runs of the billing stream over one log wrote the same rows.

Everything the stream decides is a function of the log (``shared.clock``), so two runs with the
same settings — the live speed layer at any ``--segments-per-batch``, killed and restarted or
not, and a Kappa replay — write the same rows to every output table. Only bookkeeping may
differ: which micro-batch wrote a row (``batch_id``, ``updated_batch_id``) and how long a batch
took (``duration_seconds``).

* ``dead_letter``, ``duplicate_events``, ``late_events``, ``speed_aggregates`` and
  ``stream_state`` are compared as multisets of rows, bookkeeping left out;
* ``stream_metrics`` has one row per micro-batch, so a run cut into other micro-batches has
  other rows. What the cut cannot change is compared: the totals over every batch (lines, where
  they went, late updates, and the money on time, late and duplicated per currency), the
  segments read, and where the stream stood after its last batch (the watermark in force, the
  largest event time, the state rows kept).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from decimal import Decimal

import pyarrow as pa

from shared.catalog import (
    DEAD_LETTER,
    DUPLICATE_EVENTS,
    LATE_EVENTS,
    SPEED_AGGREGATES,
    STREAM_METRICS,
    STREAM_STATE,
    Table,
)
from shared.micro_batch import TIMING_COLUMNS
from shared.tables import Tables

__all__ = [
    "BOOKKEEPING",
    "ROW_TABLES",
    "StreamsDisagree",
    "row_counts",
    "metric_totals",
    "disagreements",
    "require_same_rows",
]

BOOKKEEPING = frozenset({"batch_id", "updated_batch_id", *TIMING_COLUMNS})
ROW_TABLES = (DEAD_LETTER, DUPLICATE_EVENTS, LATE_EVENTS, SPEED_AGGREGATES, STREAM_STATE)
_COUNTS = ("input_lines", "on_time", "late", "late_updates", "duplicates", "dead_letters", "heartbeats")
_MONEY = ("on_time_amounts", "late_amounts", "duplicate_amounts")
_AFTER_THE_LAST = ("next_watermark", "max_event_time", "state_rows")


class StreamsDisagree(RuntimeError):
    """Two runs of the stream that must write the same rows did not."""


def _hashable(value):
    return tuple(map(_hashable, value)) if isinstance(value, (list, tuple)) else value


def row_counts(table: pa.Table, ignore: Iterable[str] = BOOKKEEPING) -> Counter:
    """``table``'s rows as a multiset, without the columns ``ignore`` (map columns, which Arrow
    gives as lists of pairs, become tuples). Equal values compare equal whatever their Arrow
    types: ``Decimal("1.5") == Decimal("1.50")``."""
    left_out = set(ignore)
    return Counter(
        tuple((k, _hashable(v)) for k, v in sorted(row.items()) if k not in left_out) for row in table.to_pylist()
    )


def metric_totals(metrics: pa.Table) -> dict:
    """What ``stream_metrics`` says whatever micro-batches the log was cut into (module docstring)."""
    rows = sorted(metrics.to_pylist(), key=lambda row: row["batch_id"])
    totals: dict = {name: sum(row[name] for row in rows) for name in _COUNTS}
    for name in _MONEY:
        money: dict[str, Decimal] = {}
        for row in rows:
            for currency, amount in row[name] or ():
                money[currency] = money.get(currency, Decimal(0)) + amount
        totals[name] = {currency: amount for currency, amount in money.items() if amount}
    firsts = [row["first_segment"] for row in rows if row["first_segment"] is not None]
    lasts = [row["last_segment"] for row in rows if row["last_segment"] is not None]
    totals["segments"] = (min(firsts, default=None), max(lasts, default=None))
    for name in _AFTER_THE_LAST:
        totals[name] = rows[-1][name] if rows else None
    return totals


def disagreements(
    left: Mapping[str, pa.Table], right: Mapping[str, pa.Table], tables: Iterable[Table] = (*ROW_TABLES, STREAM_METRICS)
) -> dict[str, str]:
    """Per table of ``tables`` on which two runs differ (``left`` and ``right``: their rows by
    table name; a table absent holds no rows), what differs: rows found in one run only, or the
    ``stream_metrics`` figures that differ."""
    found: dict[str, str] = {}
    for table in tables:
        ours, theirs = (rows.get(table.name, table.schema.empty_table()) for rows in (left, right))
        if table is STREAM_METRICS:
            mine, other = metric_totals(ours), metric_totals(theirs)
            differing = sorted(name for name in mine if mine[name] != other[name])
            if differing:
                found[table.name] = "figures " + ", ".join(
                    f"{name} {mine[name]} against {other[name]}" for name in differing
                )
            continue
        mine, other = row_counts(ours), row_counts(theirs)
        if mine != other:
            found[table.name] = (
                f"{sum((mine - other).values())} rows only in the first, {sum((other - mine).values())} only in the second"
            )
    return found


def require_same_rows(tables: Tables, first: str, second: str, stream: str) -> None:
    """Raise ``StreamsDisagree`` unless the stream tables under the prefixes ``first`` and
    ``second`` (e.g. a live run's and its replay's) agree on every table; ``stream`` names the
    stream in the message."""
    tables_of = lambda prefix: {
        t.name: tables.read_arrow(t.at(prefix)) for t in (*ROW_TABLES, STREAM_METRICS) if tables.exists(t.at(prefix))
    }
    differing = disagreements(tables_of(first), tables_of(second))
    if differing:
        raise StreamsDisagree(
            f"{stream}: {first} and {second} must hold the same rows but disagree on "
            + "; ".join(f"{name} ({what})" for name, what in differing.items())
        )

"""A declared pipeline's tables, named after it and shaped by its declaration.

Every table is a ``DeclaredTable``: a ``shared.catalog.Table`` whose schema is built from the
declaration (its keys and measures) instead of imported from a module. For a pipeline ``NAME``:

=============================  ===============================================================
``NAME_windows``               the stream's windows, merged by (``window_start``,
                               ``window_end``, keys): ``event_count`` and one exact sum per
                               measure under its own name (a decimal's as ``decimal(38, s)``,
                               a long's as ``int64``); a session merged into a larger one is
                               deleted, so the table holds the stream's sessions as they are
``NAME_late``                  the stream's side output: one row per (event, window) it missed
                               (a session event: one row, the session ``[t, t + gap)`` it would
                               have formed), the event's keys and measures, the window and the
                               ``watermark`` it was judged by
``NAME_duplicates``            later copies of an event id, with the raw line and where its
                               first copy is
``NAME_dead_letter``           lines the declaration refuses (the raw line, the reason)
``NAME_stream_metrics``        one row per micro-batch (``lklab health`` reads it), with
                               ``duration_seconds``, the step's time (added later: an
                               older table takes the column at its next micro-batch)
``NAME_stream_state``          the open windows (or held sessions), the ids remembered and the
                               log's clock
``NAME_truth``                 the batch truth: the windows' rows over the whole log
``NAME_batch_duplicates``      the batch's later copies
``NAME_batch_dead_letter``     the batch's dead letters
=============================  ===============================================================
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal

import pyarrow as pa

from lklab.pipelines.declared.declaration import Declaration
from lklab.pipelines.declared.names import table_name
from shared.catalog import LATENCY_COLUMNS, Table
from shared.events import UTC_MICROS
from shared.line_rows import EVENT_CLOCK, EVENT_ID, LINE_POSITION, RAW_LINE
from shared.live_latency import LATENCY_FIELDS
from shared.speed import DEAD_LETTER_SCHEMA

__all__ = [
    "DeclaredTable",
    "DeclaredTables",
    "tables_of",
    "window_schema",
    "window_change_schema",
    "window_row",
    "empty_totals",
    "late_schema",
    "duplicate_schema",
    "metrics_schema",
    "state_schema",
    "sum_type",
    "METRIC_COUNTS",
]

_BATCH_ID = pa.field("batch_id", pa.int64())
# What a micro-batch's lines became: every line is exactly one of these (``input_lines`` is their sum).
METRIC_COUNTS = ("input_lines", "events", "late_events", "duplicates", "dead_letters", "heartbeats")


@dataclass(frozen=True)
class DeclaredTable(Table):
    """A ``Table`` whose rows' schema is given (``arrow``), not imported; equal and hashed by name."""

    arrow: pa.Schema | None = field(default=None, compare=False)

    @property
    def schema(self) -> pa.Schema:
        return self.arrow


def sum_type(measure) -> pa.DataType:
    """A measure's sum: ``decimal(38, s)``, the widest exact type (a long's scale is 0: an integer
    of up to 38 digits, so that readings each within 64 bits never overflow their window's sum)."""
    return pa.decimal128(38, measure.scale)


def _keys(d: Declaration) -> list[pa.Field]:
    return [pa.field(key, pa.string()) for key in d.keys]


def _measures(d: Declaration) -> list[pa.Field]:
    return [pa.field(m.name, m.arrow_type) for m in d.measures]


_WINDOW = (pa.field("window_start", UTC_MICROS), pa.field("window_end", UTC_MICROS))


def window_schema(d: Declaration) -> pa.Schema:
    """One row per window and keys: its bounds, the keys, ``event_count`` and each measure's exact sum."""
    sums = [pa.field(m.name, sum_type(m)) for m in d.measures]
    return pa.schema([*_WINDOW, *_keys(d), pa.field("event_count", pa.int64()), *sums])


def window_change_schema(d: Declaration) -> pa.Schema:
    """``window_schema`` and ``_delete``: a row of a micro-batch's changes, true for a window the
    table must lose (a session merged into a larger one)."""
    return window_schema(d).append(pa.field("_delete", pa.bool_()))


def empty_totals(d: Declaration) -> list:
    """A window's totals before any event: ``[event_count, *sums]``, zero each (decimals as ``Decimal``)."""
    return [0, *(0 if m.type == "long" else Decimal(0) for m in d.measures)]


def window_row(d: Declaration, window: tuple, totals: list) -> dict:
    """A ``window_schema`` row of ``window`` (``(start, end, *keys)``, times in microseconds) and
    its ``totals`` (``[event_count, *sums]``)."""
    start, end, *keys = window
    return {
        "window_start": start,
        "window_end": end,
        **dict(zip(d.keys, keys)),
        "event_count": totals[0],
        **{m.name: total for m, total in zip(d.measures, totals[1:])},
    }


def late_schema(d: Declaration) -> pa.Schema:
    """One row per (event, window) the event missed: the event, the window and the watermark it was judged by."""
    return pa.schema(
        [
            *LINE_POSITION,
            EVENT_ID,
            *_keys(d),
            *_measures(d),
            *EVENT_CLOCK,
            *_WINDOW,
            pa.field("watermark", UTC_MICROS),
            _BATCH_ID,
        ]
    )


def duplicate_schema(d: Declaration) -> pa.Schema:
    """A later copy of an event id: its event, its raw line, where the first copy is and whether its payload differs."""
    return pa.schema(
        [
            *LINE_POSITION,
            EVENT_ID,
            *_keys(d),
            *_measures(d),
            *EVENT_CLOCK,
            RAW_LINE,
            pa.field("first_segment", pa.int64()),
            pa.field("first_line_number", pa.int64()),
            pa.field("payload_conflict", pa.bool_()),
            _BATCH_ID,
        ]
    )


def metrics_schema(d: Declaration) -> pa.Schema:
    return pa.schema(
        [
            pa.field("batch_id", pa.int64(), nullable=False),
            pa.field("first_segment", pa.int64()),
            pa.field("last_segment", pa.int64()),
            *(pa.field(name, pa.int64()) for name in METRIC_COUNTS),
            pa.field("watermark", UTC_MICROS),
            pa.field("watermark_lag_seconds", pa.float64()),
            pa.field("duration_seconds", pa.float64()),
            *LATENCY_FIELDS,  # set by the live runner
        ]
    )


def state_schema(d: Declaration) -> pa.Schema:
    """One table, three kinds of rows: ``window`` (an open window's totals), ``seen`` (an event id
    remembered: its first line, ``remembered_from`` and payload, its measures in the sums' columns)
    and ``clock`` (the log's clock)."""
    window = window_schema(d)
    return pa.schema(
        [
            pa.field("kind", pa.string()),
            *window,
            EVENT_ID,
            pa.field("event_time", UTC_MICROS),
            *LINE_POSITION,
            pa.field("remembered_from", pa.int64()),
            *(pa.field(name, pa.int64()) for name in ("processing_time", "tick", "max_before_tick", "max_in_tick")),
        ]
    )


def _without_batch(schema: pa.Schema) -> pa.Schema:
    return schema.remove(schema.get_field_index("batch_id"))


@dataclass(frozen=True)
class DeclaredTables:
    """Every table of one declared pipeline (the module docstring)."""

    windows: DeclaredTable
    late: DeclaredTable
    duplicates: DeclaredTable
    dead_letter: DeclaredTable
    stream_metrics: DeclaredTable
    stream_state: DeclaredTable
    truth: DeclaredTable
    batch_duplicates: DeclaredTable
    batch_dead_letter: DeclaredTable

    @property
    def stream(self) -> tuple[DeclaredTable, ...]:
        return (self.dead_letter, self.duplicates, self.late, self.windows, self.stream_metrics, self.stream_state)

    @property
    def batch(self) -> tuple[DeclaredTable, ...]:
        return (self.truth, self.batch_duplicates, self.batch_dead_letter)


def tables_of(d: Declaration) -> DeclaredTables:
    """The tables of the pipeline ``d`` declares."""

    def table(role: str, schema: pa.Schema, added: tuple[str, ...] = ()) -> DeclaredTable:
        return DeclaredTable(table_name(d.name, role), f"declared:{d.name}", added=added, arrow=schema)

    return DeclaredTables(
        windows=table("windows", window_schema(d)),
        late=table("late", late_schema(d)),
        duplicates=table("duplicates", duplicate_schema(d)),
        dead_letter=table("dead_letter", DEAD_LETTER_SCHEMA),
        stream_metrics=table("stream_metrics", metrics_schema(d), added=("duration_seconds", *LATENCY_COLUMNS)),
        stream_state=table("stream_state", state_schema(d)),
        truth=table("truth", window_schema(d)),
        batch_duplicates=table("batch_duplicates", _without_batch(duplicate_schema(d))),
        batch_dead_letter=table("batch_dead_letter", _without_batch(DEAD_LETTER_SCHEMA)),
    )

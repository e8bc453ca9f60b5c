"""What every stream step reports about one micro-batch, whatever the pipeline computes.

The steps of the three pipelines (``shared.speed.stream_step``, ``lklab.pipelines.unique_visitors.step``'s
``visitors_step``, ``lklab.pipelines.order_payments.rule.join_step``) read a micro-batch's lines in log order
and send each somewhere: a dead letter (it could not be parsed or validated), a duplicate (a
later copy of an event already seen), or the pipeline's own outputs. ``MicroBatch`` holds what
they share, the step's state after the batch included (what the next batch starts from); each
step's result adds its outputs.

A stream's metrics table has one row per micro-batch: ``metrics_schema`` lays out the columns
every pipeline's has (the batch, the segments it read, its line counts, its watermarks) around
the pipeline's own counts, and ``metrics_row`` fills the shared ones from the step's result.
A step's duplicates have one layout too (``duplicate_schema``), around the pipeline's events.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

import pyarrow as pa
import pyarrow.compute as pc

from shared.catalog import LATENCY_COLUMNS
from shared.events import UTC_MICROS
from shared.live_latency import LATENCY_FIELDS

__all__ = [
    "BATCH_ID",
    "TIMING_COLUMNS",
    "MicroBatch",
    "StepRows",
    "StepState",
    "duplicate_schema",
    "metrics_row",
    "metrics_schema",
]

BATCH_ID = pa.field("batch_id", pa.int64(), nullable=False)
# The metrics columns that say how long a run took or when, not what it read: two runs of a
# stream over the same log (live, replayed, cut another way, restarted after a crash) agree on
# every other.
TIMING_COLUMNS = frozenset({"duration_seconds", *LATENCY_COLUMNS})


class StepState(Protocol):
    """What every step's state says of itself: ``rows``, the size it grows with (remembered
    first copies plus whatever the pipeline holds)."""

    @property
    def rows(self) -> int: ...


S = TypeVar("S", bound=StepState)
T = TypeVar("T")


@dataclass(frozen=True)
class StepRows(Generic[T]):
    """The rows every step writes of one micro-batch besides its own outputs: its ``duplicates``
    and ``dead_letters``, its ``metrics`` (one row), and the ``state`` after it, for a step whose
    result carries its metrics row as a table (a step's result adds its outputs)."""

    duplicates: pa.Table
    dead_letters: pa.Table
    metrics: pa.Table
    state: T


@dataclass(frozen=True)
class MicroBatch(Generic[S]):
    """The lines of one micro-batch: how many (``heartbeats`` of them carry no event), the
    watermark its first line was judged by (``watermark``) and ``W*`` in force after its last
    (``next_watermark``), in microseconds (None: unknown, no event time seen yet), its
    ``dead_letters`` and ``duplicates`` rows, and the step's ``state`` after it (the pipeline's
    own kind of ``StepState``)."""

    input_lines: int
    heartbeats: int
    watermark: int | None
    next_watermark: int | None
    dead_letters: pa.Table
    duplicates: pa.Table
    state: S

    @property
    def state_rows(self) -> int:
        """The state's rows after the batch."""
        return self.state.rows


def metrics_schema(counts: Sequence[str], *after: pa.Field) -> pa.Schema:
    """``batch_id``, ``first_segment``/``last_segment`` read (null: none), ``counts`` (int64),
    ``watermark``/``next_watermark`` (UTC timestamps, null: unknown), then ``after``, then the
    live latency (``shared.live_latency.LATENCY_FIELDS``, set by the live runner)."""
    return pa.schema(
        [
            BATCH_ID,
            pa.field("first_segment", pa.int64()),
            pa.field("last_segment", pa.int64()),
            *[pa.field(name, pa.int64()) for name in counts],
            pa.field("watermark", UTC_MICROS),
            pa.field("next_watermark", UTC_MICROS),
            *after,
            *LATENCY_FIELDS,
        ]
    )


def duplicate_schema(events: pa.Schema) -> pa.Schema:
    """A step's ``duplicates`` rows: a later copy's columns of ``events``, where the first copy
    stands in the log (``first_segment``, ``first_line_number``), ``payload_conflict`` (their
    payloads differ) and ``batch_id``."""
    return pa.schema(
        [
            *events,
            pa.field("first_segment", pa.int64()),
            pa.field("first_line_number", pa.int64()),
            pa.field("payload_conflict", pa.bool_()),
            BATCH_ID,
        ]
    )


def metrics_row(schema: pa.Schema, batch_id: int, parsed: pa.Table, step: MicroBatch, **figures) -> pa.Table:
    """The one-row metrics table of micro-batch ``batch_id`` (``parsed``: the lines it read),
    ``figures`` giving the pipeline's own columns of ``schema`` (the live latency is null until
    the live runner sets it)."""
    row = {
        "batch_id": batch_id,
        "first_segment": pc.min(parsed["segment"]).as_py() if parsed.num_rows else None,
        "last_segment": pc.max(parsed["segment"]).as_py() if parsed.num_rows else None,
        "input_lines": step.input_lines,
        "duplicates": step.duplicates.num_rows,
        "dead_letters": step.dead_letters.num_rows,
        "heartbeats": step.heartbeats,
        "watermark": step.watermark,
        "next_watermark": step.next_watermark,
        **figures,
    }
    columns = {f.name: pa.array([row.get(f.name)], pa.int64() if f.type == UTC_MICROS else f.type) for f in schema}
    return pa.table(columns).cast(schema)

"""One micro-batch of the stream, in Arrow (no I/O): where every line goes.

Spark's ``withWatermark`` would drop late rows; this step keeps every line. Given the parsed
lines of a micro-batch (``parse_events`` output, as Arrow) and the ``StreamState`` left by the
batch before, ``stream_step``

1. runs the log's clock over the lines (``shared.clock``): each line's processing time, the
   watermark it is judged by and the one in force after it;
2. deduplicates the events against the first copies remembered (``shared.dedup``: the dedup
   horizon is judged against each copy's watermark; dedup comes before lateness, so a resent
   late event is a duplicate, not a second late event);
3. judges every (event, window) pair against its line's watermark (``shared.stream_windows``):
   the side output gets the late ones, the others change their windows, and the watermark
   finalises windows (``open`` -> ``final``) at the line after which it reaches their end.

and returns the dead letters, duplicates, late events, per-event outcomes, the window rows to
merge into ``speed_aggregates``, and the state to carry on. Every decision depends on the lines
and the state alone, so a log cut into other micro-batches, a restart from a committed state, or
the Kappa replay (which runs steps 1-3 through Spark over the whole log: ``shared.replay``) give
the same rows. Each step is a function of its own (``clocked_batch``, ``deduplicate_stream`` with
``remembered_after``, ``window_step``), so the step can also run as three operators on Spark's
executors, each holding its part of the state (``shared.keyed_speed``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from shared.clock import NO_TIME, Advances, ClockRun, ClockSettings, ClockState, advance, line_keys
from shared.dedup import deduplicate_stream, remembered_rows, still_remembered
from shared.events import DEAD_LETTER_COLUMNS, EVENT_COLUMNS, EVENT_SCHEMA
from shared.micro_batch import MicroBatch, duplicate_schema
from shared.stream_state import StreamState
from shared.stream_windows import LATE_SCHEMA, WINDOW_CHANGE_SCHEMA, window_step
from shared.windows import WindowSpec

__all__ = [
    "StreamSettings",
    "StreamBatch",
    "ClockedLines",
    "DEAD_LETTER_SCHEMA",
    "DUPLICATE_SCHEMA",
    "LATE_SCHEMA",
    "WINDOW_CHANGE_SCHEMA",
    "ClockedBatch",
    "clocked_batch",
    "clocked_lines",
    "dead_letter_rows",
    "remembered_after",
    "duplicate_rows",
    "stream_step",
]

_BATCH = pa.field("batch_id", pa.int64(), nullable=False)
DEAD_LETTER_SCHEMA = pa.schema(
    [
        *[
            pa.field(name, pa.int64() if name in ("segment", "line_number") else pa.string())
            for name in DEAD_LETTER_COLUMNS
        ],
        _BATCH,
    ]
)
DUPLICATE_SCHEMA = duplicate_schema(EVENT_SCHEMA)


@dataclass(frozen=True)
class StreamSettings:
    """The stream's settings; durations in microseconds."""

    window: WindowSpec
    watermark_delay: int
    allowed_lateness: int
    dedup_horizon: int
    watermark_interval: int = 1_000_000

    @property
    def clock(self) -> ClockSettings:
        return ClockSettings(self.watermark_delay, self.watermark_interval)

    @classmethod
    def of(cls, config) -> StreamSettings:
        """From a ``LabConfig``."""
        return cls(
            config.window,
            config.watermark_delay,
            config.allowed_lateness,
            config.dedup_horizon,
            config.watermark_interval,
        )


@dataclass(frozen=True)
class ClockedLines:
    """Lines in log order after the clock ran over them: the ``events`` (``EVENT_SCHEMA`` plus
    ``_line``, ``_p``, ``_w``, ``_w_after``: line key, processing time and the two watermarks as
    int64 microseconds, and ``batch_id``), and what the clock says of every line."""

    events: pa.Table
    keys: np.ndarray
    batch_ids: np.ndarray
    clock: ClockRun
    advances: Advances


def _micros_or_none(column: pa.ChunkedArray | pa.Array) -> np.ndarray:
    return column.cast(pa.int64()).fill_null(NO_TIME).to_numpy(zero_copy_only=False)


def clocked_lines(parsed: pa.Table, clock: ClockState, settings: ClockSettings, batch_ids: np.ndarray) -> ClockedLines:
    """Run the clock over ``parsed`` (``parse_events`` rows in log order) from ``clock``."""
    keys = line_keys(parsed["segment"].to_numpy(), parsed["line_number"].to_numpy())
    is_event = pc.and_(pc.is_null(parsed["reject_reason"]), pc.invert(parsed["heartbeat"]))
    event_flags = is_event.to_numpy(zero_copy_only=False) if parsed.num_rows else np.zeros(0, dtype=bool)
    times = np.where(event_flags, _micros_or_none(parsed["event_time"]), NO_TIME)
    run = advance(clock, settings, keys, _micros_or_none(parsed["ingest_time"]), times)
    events = parsed.filter(is_event).select(list(EVENT_COLUMNS)).cast(EVENT_SCHEMA)
    for name, values in (
        ("_line", keys),
        ("_p", run.processing_time),
        ("_w", run.watermark),
        ("_w_after", run.watermark_after),
        ("batch_id", batch_ids),
    ):
        events = events.append_column(name, pa.array(np.asarray(values, dtype=np.int64)[event_flags], pa.int64()))
    advances = Advances.of(keys, run, batch_ids, clock.watermark_after(settings))
    return ClockedLines(events, keys, np.asarray(batch_ids, dtype=np.int64), run, advances)


def dead_letter_rows(parsed: pa.Table, batch_ids: np.ndarray) -> pa.Table:
    """The rejected lines of ``parsed`` as ``dead_letter`` rows."""
    rejected = pc.is_valid(parsed["reject_reason"])
    rows = parsed.filter(rejected).select(list(DEAD_LETTER_COLUMNS))
    batch = (
        np.asarray(batch_ids, dtype=np.int64)[rejected.to_numpy(zero_copy_only=False)]
        if parsed.num_rows
        else np.zeros(0, np.int64)
    )
    return rows.append_column("batch_id", pa.array(batch, pa.int64())).cast(DEAD_LETTER_SCHEMA)


def duplicate_rows(duplicates: pa.Table) -> pa.Table:
    return duplicates.select(DUPLICATE_SCHEMA.names).cast(DUPLICATE_SCHEMA)


@dataclass(frozen=True)
class StreamBatch(MicroBatch[StreamState]):
    """Where the lines of one micro-batch went (``MicroBatch``), and the state after it.

    ``outcomes``: one row per first copy (``late``
    when none of its windows took it; ``late_updates``: windows it updated within the allowed
    lateness). ``history``: with ``history=True``, every change of a window row, line by line.
    """

    late_events: pa.Table
    outcomes: pa.Table
    window_changes: pa.Table
    history: pa.Table | None

    @property
    def max_event_time(self) -> int | None:
        return self.state.clock.max_event_time


@dataclass(frozen=True)
class ClockedBatch:
    """Step 1 of a micro-batch: its parsed lines in log order (``parsed``), the clock run over
    them (``lines``) from the state before, and what the clock alone decides of the batch."""

    parsed: pa.Table
    lines: ClockedLines

    @property
    def input_lines(self) -> int:
        return self.parsed.num_rows

    @property
    def heartbeats(self) -> int:
        return int(pc.sum(self.parsed["heartbeat"]).as_py() or 0) if self.parsed.num_rows else 0

    @property
    def watermark(self) -> int | None:
        """The watermark the batch's first line was judged by (``W*`` before it when it has none)."""
        if not self.parsed.num_rows:
            return self.next_watermark
        first = int(self.lines.clock.watermark[0])
        return None if first == NO_TIME else first

    @property
    def next_watermark(self) -> int | None:
        return self.lines.advances.after

    @property
    def dead_letters(self) -> pa.Table:
        return dead_letter_rows(self.parsed, self.lines.batch_ids)


def clocked_batch(parsed: pa.Table, clock: ClockState, settings: StreamSettings, batch_id: int) -> ClockedBatch:
    """Step 1: the clock over micro-batch ``batch_id``'s lines (``parse_events`` rows, any order)."""
    parsed = parsed.take(pc.sort_indices(parsed, sort_keys=[("segment", "ascending"), ("line_number", "ascending")]))
    batch_ids = np.full(parsed.num_rows, batch_id, dtype=np.int64)
    return ClockedBatch(parsed, clocked_lines(parsed, clock, settings.clock, batch_ids))


def remembered_after(remembered: pa.Table, firsts: pa.Table, watermark_after: int | None, horizon: int) -> pa.Table:
    """Step 2's state: the copies remembered before and the batch's first copies, those a later
    line can still be recognised against once the watermark is ``watermark_after``."""
    return still_remembered(pa.concat_tables([remembered, remembered_rows(firsts)]), watermark_after, horizon)


def stream_step(
    parsed: pa.Table, state: StreamState, settings: StreamSettings, batch_id: int, *, history: bool = False
) -> StreamBatch:
    """Where every line of micro-batch ``batch_id`` goes (``parsed``: its ``parse_events`` rows)."""
    batch = clocked_batch(parsed, state.clock, settings, batch_id)
    advances = batch.lines.advances
    dedup = deduplicate_stream(batch.lines.events, state.remembered, settings.dedup_horizon)
    windows = window_step(
        settings.window, settings.allowed_lateness, dedup.firsts, state.windows, advances, history=history
    )
    return StreamBatch(
        input_lines=batch.input_lines,
        heartbeats=batch.heartbeats,
        watermark=batch.watermark,
        next_watermark=batch.next_watermark,
        dead_letters=batch.dead_letters,
        duplicates=duplicate_rows(dedup.duplicates),
        late_events=windows.late,
        outcomes=windows.outcomes,
        window_changes=windows.changes,
        history=windows.history,
        state=StreamState(
            batch.lines.clock.state,
            remembered_after(state.remembered, dedup.firsts, advances.after, settings.dedup_horizon),
            windows.held,
        ),
    )

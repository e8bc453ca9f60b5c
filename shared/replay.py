"""The Kappa replay: the stream's rules over the whole log at once, on Spark's executors.

A live stream reads the log micro-batch by micro-batch and carries its state from one to the
next. Because everything it decides is a function of the log (``shared.clock``), the replay
computes the same rows without ever holding a micro-batch:

1. **The clock** at every segment boundary (``shared.log_clock``), shipped to every task.
2. **One pass over the lines**, segments in parallel: each task runs the clock over its lines
   from that state (``speed.clocked_lines``, as the live step runs a micro-batch) and judges
   every (event, window) pair on its own (``stream_windows.judge_pairs``: no pair depends on
   another). Ids seen more than once anywhere in the log are known before the pass; only their
   copies are kept whole for the next step.
3. **Dedup** of those copies, partitioned by ``event_id`` (``dedup.deduplicate_stream`` from an
   empty memory: every copy of an id in one task, in log order). What the pass judged for a
   line that turns out to be a duplicate is dropped (an anti-join on the line).
4. **Windows**: Spark sums the on-time pairs per window. Sessions, and the line-by-line
   history, need every event of a key in order: they are partitioned by ``account_id,
   currency`` (``stream_windows.window_step`` with nothing held, against the watermark's
   advances over the whole log).
5. **Figures**: one ``stream_metrics`` row per segment, as a live run reading one segment per
   micro-batch writes, from aggregates of the above; and the state such a run ends with.

Rows carry ``batch_id = segment - 1``: the micro-batch that a live run reading one segment per
micro-batch from the start gives the segment. Every other column is what any live run writes.

Each task function is pure (Arrow in, Arrow out); a task's several kinds of output travel in one
wide Arrow schema, told apart by ``_role``, and are split once the pass is cached.

**What passes through the driver.** The rows that grow with the log — window rows, late
events, duplicates, dead letters, the window history — stay where they are computed: they are
frames, and ``Tables.overwrite`` has each task write its rows as Parquet files, the driver making
one Delta commit that lists them. The driver holds only what grows with the log's segments or
ticks, or not at all:

* the clock at every segment boundary, and per segment the figures of its ``stream_metrics`` row
  (from sums per segment and currency): one entry per segment, a file of the log, not a line;
* with sessions or the history, the watermark's advances: the lines after which it rose, at
  most one per ``watermark_interval`` of the log's clock (with an interval of 0, one per line
  that raised it);
* the end state (``StreamState``): the windows still held (whose end plus the allowed lateness
  the last watermark has not passed) and the first copies remembered within the dedup horizon
  of it. That is the traffic of the last horizon of event time, whatever the log's length, and
  exactly what a live run keeps in memory between micro-batches;
* broadcast to the tasks for two joins: the 64-bit hashes of ids seen more than once, and the
  line keys of the copies found to be duplicates: 8 bytes per repeated id or duplicate line.
  These grow with the log's duplicates (a few in a hundred lines), not with its events.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal
from typing import NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema

from shared.aggregation import WINDOW_KEY
from shared.clock import NO_TIME, Advances, line_keys, split_line_keys
from shared.dedup import (
    REMEMBERED_SCHEMA,
    deduplicate_stream,
    flag_repeated,
    remembered_from,
    remembered_rows,
)
from shared.events import DEAD_LETTER_COLUMNS, EVENT_COLUMNS, EVENT_SCHEMA
from shared.log_clock import (
    LogClock,
    by_line,
    event_times,
    log_clock,
    micros_or_unknown,
)
from shared.money import MONEY_TYPE
from shared.spark_arrow import per_key
from shared.speed import DUPLICATE_SCHEMA, StreamSettings, clocked_lines
from shared.stream_metrics import BatchFigures, metrics_table
from shared.stream_state import StreamState, state_table
from shared.stream_windows import (
    HISTORY_SCHEMA,
    LATE_SCHEMA,
    WINDOW_ROW_SCHEMA,
    empty_held,
    judge_pairs,
    window_step,
)
from shared.windows import KEY_COLUMNS, micros

__all__ = ["Replay", "replay"]

_CLOCK = [pa.field(name, pa.int64()) for name in ("_line", "_p", "_w", "_w_after")]
_BATCH = pa.field("batch_id", pa.int64())
_ROLE = pa.field("_role", pa.string())
_EVENT_COLUMNS = [*EVENT_SCHEMA.names, "_line", "_p", "_w", "_w_after", "batch_id"]
_NEEDED = [
    "segment",
    "line_number",
    *EVENT_COLUMNS[2:],
    "reject_reason",
    "heartbeat",
]  # and _repeated, added before the pass


def _union(*schemas: pa.Schema) -> pa.Schema:
    """Every field of the schemas once (nullable), in order of first appearance."""
    fields: dict[str, pa.Field] = {}
    for schema in schemas:
        for field in schema:
            if field.name in fields:
                if fields[field.name].type != field.type:
                    raise TypeError(f"field {field.name}: {fields[field.name].type} and {field.type}")
                continue
            fields[field.name] = field.with_nullable(True)
    return pa.schema(list(fields.values()))


def _pack(role: str, table: pa.Table, schema: pa.Schema) -> pa.Table:
    """``table``'s rows in the wide ``schema``, tagged with ``role``."""
    count = table.num_rows
    columns = {
        field.name: (
            pa.array([role] * count, pa.string())
            if field.name == "_role"
            else table[field.name].cast(field.type)
            if field.name in table.column_names
            else pa.nulls(count, field.type)
        )
        for field in schema
    }
    return pa.table(columns, schema=schema)


# ----------------------------------------------------------------------- 2. one pass over the lines

_OUTCOME = pa.schema(
    [pa.field(name, pa.int64()) for name in ("_late", "_late_updates", "_created", "_gone", "_count", "_on_time")]
)
_SEGMENT = pa.schema([pa.field(name, pa.int64()) for name in ("_max_event", "_latest_ingest")])
_SUMS = pa.schema([pa.field(name, MONEY_TYPE) for name in ("amount_total", "_on_time_amount", "_late_amount")])
_PASS = _union(
    EVENT_SCHEMA,
    pa.schema([*_CLOCK, _BATCH]),
    LATE_SCHEMA,
    REMEMBERED_SCHEMA,
    _OUTCOME,
    _SEGMENT,
    _SUMS,
    pa.schema([_ROLE]),
)


def _sums(table: pa.Table, keys: list[str], aggregations: list[tuple], names: list[str]) -> pa.Table:
    """``table`` grouped by ``keys`` with ``aggregations`` (Arrow's), renamed to ``names``."""
    out = table.group_by(keys, use_threads=False).aggregate(aggregations)
    columns = {key: out[key] for key in keys}
    for (column, function), name in zip(aggregations, names):
        columns[name] = out[f"{column}_{function}" if column else function]
    return pa.table(columns)


class _Clocked(NamedTuple):
    """One run of consecutive segments after the clock: per segment its figures, the
    watermark's advances, its events with their clock columns, and whether each event's id is
    seen more than once in the log."""

    segments: pa.Table
    advances: pa.Table
    events: pa.Table
    repeated: pa.ChunkedArray


@dataclass(frozen=True)
class _Pass:
    """What the one pass needs to know: the clock at every boundary, the ids seen more than
    once, and whether the events themselves go on (sessions, history) or only their pairs."""

    clock: LogClock
    settings: StreamSettings
    whole_events: bool

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        received = list(batches)
        if not received:
            return
        rows = by_line(pa.Table.from_batches(received))
        segments = rows["segment"].to_numpy()
        starts_at = np.flatnonzero(np.concatenate([[True], segments[1:] != segments[:-1]]))
        present = segments[starts_at]
        bounds = [*starts_at.tolist(), len(segments)]
        # Spark packs the log's files into partitions by size, so a partition's segments seldom
        # follow each other: each run of consecutive ones is clocked from its own start, and what
        # is judged line by line after the clock is judged once for the whole partition (per
        # run, the fixed cost of a dozen Arrow calls dominated).
        runs = [
            self._clock(
                rows.slice(bounds[first], bounds[stop] - bounds[first]),
                present[first:stop],
                np.asarray(bounds[first : stop + 1]) - bounds[first],
            )
            for first, stop in self.clock.runs(present)
        ]
        yield from _pack("segment", pa.concat_tables(run.segments for run in runs), _PASS).to_batches()
        yield from _pack("advance", pa.concat_tables(run.advances for run in runs), _PASS).to_batches()
        events = pa.concat_tables(run.events for run in runs).combine_chunks()
        repeated = pa.chunked_array(
            [chunk for run in runs for chunk in run.repeated.chunks], pa.bool_()
        ).combine_chunks()
        for role, table in self._judge(events, repeated):
            yield from _pack(role, table, _PASS).to_batches()

    def _clock(self, lines: pa.Table, present: np.ndarray, offsets: np.ndarray) -> _Clocked:
        """One run of consecutive segments, clocked in one call from the state at its first."""
        state = self.clock.starts[int(present[0])]
        clocked = clocked_lines(lines, state, self.settings.clock, lines["segment"].to_numpy() - 1)
        first_line, last_line = offsets[:-1], offsets[1:] - 1
        largest = np.maximum.accumulate(
            np.concatenate([[NO_TIME if state.max_event_time is None else state.max_event_time], event_times(lines)])
        )[1:]
        figures = pa.table(
            {
                "segment": pa.array(present, pa.int64()),
                "_w": pa.array(clocked.clock.watermark[first_line], pa.int64()),
                "_w_after": pa.array(clocked.clock.watermark_after[last_line], pa.int64()),
                "_max_event": pa.array(largest[last_line], pa.int64(), mask=largest[last_line] == NO_TIME),
                "_latest_ingest": pa.array(
                    np.maximum.reduceat(micros_or_unknown(lines["ingest_time"]), first_line), pa.int64()
                ),
            }
        )
        advances = clocked.advances
        steps = pa.table(
            {
                "_line": advances.keys,
                "_p": advances.processing_time,
                "_w_after": advances.watermark_after,
                "batch_id": advances.batch_id,
            }
        )
        is_event = pc.and_(pc.is_null(lines["reject_reason"]), pc.invert(lines["heartbeat"]))
        repeated = pc.fill_null(lines.filter(is_event)["_repeated"], False)
        return _Clocked(figures, steps, clocked.events, repeated)

    def _judge(self, events: pa.Table, repeated: pa.Array):
        """Every clocked event of a partition (``repeated``: whether its id is seen more than
        once), judged: each line on its own, so any set of runs at once."""
        yield "repeat", events.filter(repeated)
        horizon, final = self.settings.dedup_horizon, self.clock.final
        since = remembered_from(micros_or_unknown(events["event_time"]), events["_w"].to_numpy())
        if final is None or (since >= final - horizon).any():
            kept = events if final is None else events.filter(pa.array(since >= final - horizon))
            yield "kept", remembered_rows(kept).append_column("_line", kept["_line"])
        created = np.searchsorted(self.clock.segments, events["segment"].to_numpy())
        # forgotten at the end of the first segment whose watermark has passed remembered_from + horizon
        gone = np.maximum(np.searchsorted(self.clock.ends, since + horizon, side="right"), created)
        single = pc.invert(repeated)
        memory = pa.table(
            {"_line": events["_line"], "_created": pa.array(created, pa.int64()), "_gone": pa.array(gone, pa.int64())}
        )
        # a copy of an id seen once in the log is never a duplicate: its figures can be summed here
        yield "memory", memory.filter(repeated)
        yield "memory_sum", _sums(memory.filter(single), ["_created", "_gone"], [([], "count_all")], ["_count"])
        if self.whole_events:
            yield "event", events
            return
        judged = judge_pairs(self.settings.window, self.settings.allowed_lateness, events)
        late = judged.late
        yield (
            "late",
            late.append_column(
                "_line", pa.array(line_keys(late["segment"].to_numpy(), late["line_number"].to_numpy()), pa.int64())
            ),
        )
        on_time = judged.on_time
        pairs = on_time.select([*WINDOW_KEY, "amount", "_p", "batch_id", "_line"])
        once = pa.array(~repeated.to_numpy(zero_copy_only=False)[on_time["_event"].to_numpy()])
        yield "pair", pairs.filter(pc.invert(once))
        yield (
            "pair_sum",
            _sums(
                pairs.filter(once),
                list(WINDOW_KEY),
                [([], "count_all"), ("amount", "sum"), ("_p", "max"), ("batch_id", "max"), ("_line", "min")],
                ["_count", "amount_total", "_p", "batch_id", "_line"],
            ),
        )
        outcomes = judged.outcomes
        per_event = pa.table(
            {
                "_line": events["_line"],
                "segment": outcomes["segment"],
                "currency": outcomes["currency"],
                "amount": outcomes["amount"],
                "_late": pc.cast(outcomes["late"], pa.int64()),
                "_late_updates": outcomes["late_updates"],
            }
        )
        yield "outcome", per_event.filter(repeated)
        yield "outcome_sum", _outcome_table(per_event.filter(single))


def _outcome_table(per_event: pa.Table) -> pa.Table:
    """Per segment and currency: on-time and late events, late updates, and their money."""
    late = pc.equal(per_event["_late"], 1)
    zero = pa.scalar(Decimal(0), MONEY_TYPE)
    money = per_event["amount"].cast(MONEY_TYPE)
    table = (
        per_event.select(["segment", "currency", "_late", "_late_updates"])
        .append_column("_on_time", pc.subtract(pa.scalar(1, pa.int64()), per_event["_late"]))
        .append_column("_on_time_amount", pc.if_else(late, zero, money))
        .append_column("_late_amount", pc.if_else(late, money, zero))
    )
    names = ["_on_time", "_late", "_late_updates", "_on_time_amount", "_late_amount"]
    return _sums(table, ["segment", "currency"], [(name, "sum") for name in names], names)


# ------------------------------------------------------------------------------ 3. dedup

_DEDUP = _union(DUPLICATE_SCHEMA, pa.schema([*_CLOCK, _BATCH, _ROLE]))


def _dedup(horizon: int, table: pa.Table) -> pa.Table:
    """Every copy of the ids in ``table`` (ids seen more than once), in log order."""
    lines = by_line(table).select(_EVENT_COLUMNS)
    result = deduplicate_stream(lines, REMEMBERED_SCHEMA.empty_table(), horizon)
    return pa.concat_tables([_pack("first", result.firsts, _DEDUP), _pack("duplicate", result.duplicates, _DEDUP)])


# ------------------------------------------------------------------------------ 4. windows

_OUTCOME_SUMS = pa.schema(
    [
        pa.field("segment", pa.int64()),
        pa.field("currency", pa.string()),
        pa.field("_on_time", pa.int64()),
        pa.field("_late", pa.int64()),
        pa.field("_late_updates", pa.int64()),
        pa.field("_on_time_amount", MONEY_TYPE),
        pa.field("_late_amount", MONEY_TYPE),
    ]
)
_WINDOWS = _union(
    WINDOW_ROW_SCHEMA, LATE_SCHEMA, HISTORY_SCHEMA, _OUTCOME_SUMS, pa.schema([pa.field("_delta", pa.int64()), _ROLE])
)


def _state_deltas(created: np.ndarray, gone: np.ndarray, segments: np.ndarray) -> pa.Table:
    """Per segment, how many state rows appear minus how many leave at its end (``gone``: the
    index of the segment after which each row has left; ``len(segments)``: never)."""
    change = np.bincount(created, minlength=len(segments) + 1) - np.bincount(gone, minlength=len(segments) + 1)
    rows = np.flatnonzero(change[: len(segments)])
    return pa.table({"segment": pa.array(segments[rows], pa.int64()), "_delta": pa.array(change[rows], pa.int64())})


def _outcome_sums(outcomes: pa.Table) -> pa.Table:
    late = outcomes["late"]
    zero = pa.scalar(Decimal(0), MONEY_TYPE)
    table = pa.table(
        {
            "segment": outcomes["segment"],
            "currency": outcomes["currency"],
            "_on_time": pc.cast(pc.invert(late), pa.int64()),
            "_late": pc.cast(late, pa.int64()),
            "_late_updates": outcomes["late_updates"],
            "_on_time_amount": pc.if_else(late, zero, outcomes["amount"].cast(MONEY_TYPE)),
            "_late_amount": pc.if_else(late, outcomes["amount"].cast(MONEY_TYPE), zero),
        }
    )
    sums = table.group_by(["segment", "currency"], use_threads=False).aggregate(
        [(name, "sum") for name in ("_on_time", "_late", "_late_updates", "_on_time_amount", "_late_amount")]
    )
    return sums.rename_columns([name.removesuffix("_sum") for name in sums.column_names])


def _line_by_line(
    settings: StreamSettings, advances: Advances, segments: np.ndarray, ends: np.ndarray, history: bool, table: pa.Table
) -> pa.Table:
    """Every event of the keys in ``table``, line by line (sessions, or the history asked for)."""
    events = by_line(table).select(_EVENT_COLUMNS)
    run = window_step(settings.window, settings.allowed_lateness, events, empty_held(), advances, history=history)
    lifetimes = run.lifetimes
    created = np.searchsorted(segments, split_line_keys(lifetimes["created"].to_numpy())[0])
    replaced = lifetimes["replaced"].to_numpy()
    expired = np.searchsorted(ends, lifetimes["expires"].to_numpy(), side="left")
    gone = np.where(
        replaced != NO_TIME, np.searchsorted(segments, split_line_keys(np.maximum(replaced, 0))[0]), expired
    )
    parts = [
        ("window", run.changes.filter(pc.invert(run.changes["_delete"]))),
        ("late", run.late),
        ("held", run.held),
        ("outcome", _outcome_sums(run.outcomes)),
        ("state", _state_deltas(created, np.maximum(gone, created), segments)),
    ]
    if run.history is not None:
        parts.append(("history", run.history))
    return pa.concat_tables([_pack(role, part, _WINDOWS) for role, part in parts])


@dataclass(frozen=True)
class _Windows:
    rows: DataFrame
    late: DataFrame
    outcome_sums: list
    held: pa.Table
    history: DataFrame | None
    window_deltas: pa.Table
    cached: tuple[DataFrame, ...] = ()


def _window_rows(final: int | None, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Per-window totals of on-time pairs as ``WINDOW_ROW_SCHEMA`` rows: final once the
    watermark after the log's last line (``final``) has reached the window's end."""
    final_time = NO_TIME if final is None else final
    for batch in batches:
        ends_of = micros(batch.column("window_end"))
        yield from (
            pa.table(
                {
                    **{name: batch.column(name) for name in WINDOW_KEY},
                    "event_count": batch.column("event_count"),
                    "amount_total": batch.column("amount_total"),
                    "status": pa.array(
                        np.where((final_time != NO_TIME) & (final_time >= ends_of), "final", "open"), pa.string()
                    ),
                    "updated_batch_id": batch.column("updated_batch_id"),
                    "updated_ingest_time": batch.column("_p").cast(pa.timestamp("us", tz="UTC")),
                }
            )
            .cast(WINDOW_ROW_SCHEMA)
            .to_batches()
        )


def _window_lifetimes(
    segments: np.ndarray, ends: np.ndarray, allowed_lateness: int, batches: Iterator[pa.RecordBatch]
) -> Iterator[pa.RecordBatch]:
    """Per segment, how many fixed windows of these totals the state gains minus loses there:
    a window is held from the segment of its first line until the watermark after a segment
    reaches its end plus the allowed lateness."""
    for batch in batches:
        expires = micros(batch.column("window_end")) + allowed_lateness
        created = np.searchsorted(segments, split_line_keys(batch.column("_line").to_numpy())[0])
        gone = np.maximum(np.searchsorted(ends, expires, side="left"), created)
        yield from _state_deltas(created, gone, segments).to_batches()


def _as_rows(frame: DataFrame, schema: pa.Schema) -> DataFrame:
    """``frame``'s columns of ``schema``, typed (and nullable or not) exactly as ``schema``: the
    rows a live run writes from Arrow, here left on the executors."""

    def cast(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            yield from pa.Table.from_batches([batch]).cast(schema).to_batches()

    return frame.select(*schema.names).mapInArrow(cast, from_arrow_schema(schema))


def _collected(frame: DataFrame, schema: pa.Schema) -> pa.Table:
    return frame.select(*schema.names).toArrow().cast(schema)


def _summed(
    pairs: DataFrame, late: DataFrame, outcomes: DataFrame, clock: LogClock, settings: StreamSettings
) -> _Windows:
    """Fixed windows: the on-time pairs (partly summed per task, duplicates' already dropped)
    summed per window by Spark."""
    totals = (
        pairs.groupBy(*WINDOW_KEY)
        .agg(
            F.sum("_count").alias("event_count"),
            F.sum("amount_total").cast("decimal(38,6)").alias("amount_total"),
            F.max("batch_id").alias("updated_batch_id"),
            F.max("_p").alias("_p"),
            F.min("_line").alias("_line"),
        )
        .persist()
    )
    final, lateness = clock.final, settings.allowed_lateness
    rows = totals.mapInArrow(functools.partial(_window_rows, final), from_arrow_schema(WINDOW_ROW_SCHEMA))
    held = rows if final is None else rows.where(F.unix_micros("window_end") + F.lit(lateness) > F.lit(final))
    deltas = (
        totals.select("window_end", "_line")
        .mapInArrow(
            functools.partial(_window_lifetimes, clock.segments, clock.ends, lateness), "segment long, _delta long"
        )
        .groupBy("segment")
        .agg(F.sum("_delta").alias("_delta"))
    )
    sums = (
        outcomes.groupBy("segment", "currency")
        .agg(
            *[F.sum(c).alias(c) for c in ("_on_time", "_late", "_late_updates")],
            *[F.sum(c).cast("decimal(38,6)").alias(c) for c in ("_on_time_amount", "_late_amount")],
        )
        .collect()
    )
    return _Windows(
        rows=rows,
        late=late,
        outcome_sums=sums,
        held=_collected(held, WINDOW_ROW_SCHEMA),
        history=None,
        window_deltas=deltas.toArrow(),
        cached=(totals,),
    )


def _ordered(
    events: DataFrame, clock: LogClock, advances: Advances, settings: StreamSettings, history: bool
) -> _Windows:
    task = functools.partial(_line_by_line, settings, advances, clock.segments, clock.ends, history)
    windowed = per_key(events, list(KEY_COLUMNS), task, from_arrow_schema(_WINDOWS)).persist()
    outcomes = (
        windowed.where("_role = 'outcome'")
        .groupBy("segment", "currency")
        .agg(
            *[F.sum(c).alias(c) for c in ("_on_time", "_late", "_late_updates")],
            *[F.sum(c).cast("decimal(38,6)").alias(c) for c in ("_on_time_amount", "_late_amount")],
        )
        .collect()
    )
    return _Windows(
        rows=_as_rows(windowed.where("_role = 'window'"), WINDOW_ROW_SCHEMA),
        late=windowed.where("_role = 'late'").select(*LATE_SCHEMA.names),
        outcome_sums=outcomes,
        held=_collected(windowed.where("_role = 'held'"), WINDOW_ROW_SCHEMA),
        history=windowed.where("_role = 'history'").select(*HISTORY_SCHEMA.names) if history else None,
        window_deltas=windowed.where("_role = 'state'")
        .groupBy("segment")
        .agg(F.sum("_delta").alias("_delta"))
        .toArrow(),
        cached=(windowed,),
    )


# ------------------------------------------------------------------------------ the whole


@dataclass(frozen=True)
class Replay:
    """The replay's output: frames for the stream's tables, plus the metrics and the end state.

    ``first_copies`` (with ``history`` or session windows, else None): the events the stream
    counted once (``EVENT_SCHEMA`` plus ``processing_time``, the line's moment on the log's
    clock). Frames are valid until ``release``."""

    dead_letters: DataFrame
    duplicates: DataFrame
    late_events: DataFrame
    window_rows: DataFrame
    history: DataFrame | None
    metrics: pa.Table
    state: pa.Table
    first_copies: DataFrame | None
    cached: tuple[DataFrame, ...]

    @property
    def windows(self) -> pa.Table:
        """``window_rows`` collected (``WINDOW_ROW_SCHEMA``), for a look at a small replay."""
        return _collected(self.window_rows, WINDOW_ROW_SCHEMA)

    def release(self) -> None:
        for frame in self.cached:
            frame.unpersist()


def replay(parsed: DataFrame, settings: StreamSettings, *, history: bool = False) -> Replay:
    """The stream's rows for the whole log (``parsed``: ``parse_events`` output, cached by the
    caller), as a live run reading one segment per micro-batch writes them."""
    clock, lines, stats = log_clock(parsed.select(*_NEEDED), settings.clock)
    whole_events = history or settings.window.pick(fixed=False, merging=True)
    task = _Pass(clock, settings, whole_events)
    passed = (
        lines.transform(flag_repeated, "reject_reason IS NULL AND NOT heartbeat")
        .mapInArrow(task, from_arrow_schema(_PASS))
        .persist()
    )
    role = lambda name: passed.where(F.col("_role") == name)
    roles = lambda *names: passed.where(F.col("_role").isin(*names))

    contested = per_key(
        role("repeat").select(*_EVENT_COLUMNS),
        ["event_id"],
        functools.partial(_dedup, settings.dedup_horizon),
        from_arrow_schema(_DEDUP),
    ).persist()
    duplicate_lines = F.broadcast(contested.where("_role = 'duplicate'").select("_line"))
    counted = lambda frame: frame.join(duplicate_lines, "_line", "left_anti")  # what was judged of a duplicate goes
    duplicates = contested.where("_role = 'duplicate'").select(*DUPLICATE_SCHEMA.names)

    first_copies = None
    if whole_events:
        steps = role("advance").select(
            F.col("_line").alias("keys"),
            F.col("_p").alias("processing_time"),
            F.col("_w_after").alias("watermark_after"),
            "batch_id",
        )
        advances = Advances.from_table(steps.toArrow().sort_by("keys"), after=clock.final)
        events = counted(role("event")).select(*_EVENT_COLUMNS)
        windows = _ordered(events, clock, advances, settings, history)
        first_copies = events.select(*EVENT_SCHEMA.names, F.timestamp_micros("_p").alias("processing_time"))
    else:
        # A part summed in the pass and the copies of repeated ids, in one scan of the pass each:
        # a sum's ``_line`` is null or a line of an id seen once, never a duplicate's, so the
        # anti-join keeps every sum.
        single = F.col("_role").endswith("_sum")
        pairs = counted(roles("pair", "pair_sum")).select(
            *WINDOW_KEY,
            F.when(single, F.col("_count")).otherwise(1).cast("long").alias("_count"),
            F.when(single, F.col("amount_total"))
            .otherwise(F.col("amount"))
            .cast("decimal(38,6)")
            .alias("amount_total"),
            "_p",
            "batch_id",
            "_line",
        )
        late = F.col("_late")
        money = lambda part, summed: (  # noqa: E731
            F.when(single, F.col(summed)).otherwise(F.when(late == part, F.col("amount")).otherwise(0))
        )
        outcomes = counted(roles("outcome", "outcome_sum")).select(
            "segment",
            "currency",
            F.when(single, F.col("_on_time")).otherwise(1 - late).alias("_on_time"),
            "_late",
            "_late_updates",
            money(0, "_on_time_amount").cast("decimal(38,6)").alias("_on_time_amount"),
            money(1, "_late_amount").cast("decimal(38,6)").alias("_late_amount"),
        )
        windows = _summed(pairs, counted(role("late")).select(*LATE_SCHEMA.names), outcomes, clock, settings)
    memory = counted(roles("memory", "memory_sum")).select(
        "_created", "_gone", F.when(F.col("_role") == "memory_sum", F.col("_count")).otherwise(1).alias("_count")
    )
    change = F.explode(
        F.array(
            F.struct(F.col("_created").alias("at"), F.col("_count").alias("n")),
            F.struct(F.col("_gone").alias("at"), (-F.col("_count")).alias("n")),
        )
    )
    by_index = {
        r["at"]: r["n"] for r in memory.select(change.alias("c")).groupBy("c.at").agg(F.sum("c.n").alias("n")).collect()
    }
    state_change = {segment: by_index.get(index, 0) for index, segment in enumerate(clock.segments.tolist())}
    for segment, delta in zip(
        windows.window_deltas["segment"].to_pylist(), windows.window_deltas["_delta"].to_pylist()
    ):
        state_change[segment] += delta

    per_segment = {
        r["segment"]: r
        for r in role("segment")
        .select("segment", "_w", "_w_after", "_max_event", "_latest_ingest")
        .toArrow()
        .to_pylist()
    }
    dup_sums = (
        duplicates.groupBy("segment", "currency")
        .agg(F.count(F.lit(1)).alias("n"), F.sum("amount").cast("decimal(38,6)").alias("money"))
        .collect()
    )
    metrics = _metrics(stats, per_segment, dup_sums, windows.outcome_sums, state_change)
    kept = counted(role("kept")).select(*REMEMBERED_SCHEMA.names).toArrow()
    end_state = StreamState(clock.end, kept.cast(REMEMBERED_SCHEMA), windows.held)
    dead = parsed.where("reject_reason IS NOT NULL").select(
        *DEAD_LETTER_COLUMNS, (F.col("segment") - 1).alias("batch_id")
    )
    return Replay(
        dead_letters=dead,
        duplicates=duplicates,
        late_events=windows.late,
        window_rows=windows.rows,
        history=windows.history,
        metrics=metrics,
        state=state_table(end_state),
        first_copies=first_copies,
        cached=(passed, contested, *windows.cached),
    )


def _money(rows: list[dict], column: str) -> list[tuple[str, Decimal]]:
    return sorted((r["currency"], r[column]) for r in rows if r[column] is not None and r["currency"] is not None)


def _metrics(stats: pa.Table, per_segment: dict, dup_sums: list, outcomes: list, state_change: dict) -> pa.Table:
    dups: dict[int, list] = {}
    for row in dup_sums:
        dups.setdefault(row["segment"], []).append({"currency": row["currency"], "n": row["n"], "money": row["money"]})
    outs: dict[int, list] = {}
    for row in outcomes:
        outs.setdefault(row["segment"], []).append(row.asDict())
    records, state_rows = [], 0
    for row in stats.to_pylist():
        segment = row["segment"]
        clock = per_segment[segment]
        state_rows += state_change.get(segment, 0)
        mine, copies = outs.get(segment, []), dups.get(segment, [])
        known = lambda value: None if value == NO_TIME else value
        records.append(
            BatchFigures(
                batch_id=segment - 1,
                first_segment=segment,
                last_segment=segment,
                input_lines=row["lines"],
                on_time=sum(r["_on_time"] for r in mine),
                late=sum(r["_late"] for r in mine),
                late_updates=sum(r["_late_updates"] for r in mine),
                duplicates=sum(r["n"] for r in copies),
                dead_letters=row["dead_letters"],
                heartbeats=row["heartbeats"],
                watermark=known(clock["_w"]),
                next_watermark=known(clock["_w_after"]),
                max_event_time=clock["_max_event"],
                latest_ingest=known(clock["_latest_ingest"]),
                state_rows=state_rows,
                on_time_amounts=_money([r for r in mine if r["_on_time"]], "_on_time_amount"),
                late_amounts=_money([r for r in mine if r["_late"]], "_late_amount"),
                duplicate_amounts=_money(copies, "money"),
                duration_seconds=None,
            )
        )
    return metrics_table(records)

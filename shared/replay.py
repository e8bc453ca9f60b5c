"""The Kappa replay: the stream's rules over the whole log at once, on Spark's executors.

A live stream reads the log micro-batch by micro-batch and carries its state from one to the
next. Because everything it decides is a function of the log (``shared.clock``), the replay
computes the same rows without ever holding a micro-batch:

1. **The clock.** Per segment, the largest ingest time gives the processing time at the start
   of the next one; per segment, two pseudo-lines (``clock.tick_summary``) carry its ticks.
   Folding ``clock.advance`` over them on the driver gives the clock's state at every segment
   boundary: a small sequence, shipped to every task.
2. Each segment's lines run through the clock from that state (``speed.clocked_lines``, as the
   live step runs a micro-batch), segments in parallel; the watermark's advances over the whole
   log are collected (at most one per tick).
3. **Dedup**: the ids seen more than once are found by Spark; only their copies are
   partitioned by ``event_id`` (``dedup.deduplicate_stream`` from an empty memory: every copy
   of an id in one task, in log order); every other line is a first copy as it stands.
4. **Windows**: with fixed windows every (event, window) pair is judged where the event is
   (``stream_windows.judge_pairs``: no pair depends on another) and Spark sums the pairs that
   count per window; sessions (and a history, line by line) are partitioned by ``account_id,
   currency`` (``stream_windows.window_step`` with nothing held, against the advances of the
   whole log).
5. **Figures**: one ``stream_metrics`` row per segment, as a live run reading one segment per
   micro-batch would write, from aggregates of the above; and the state such a run ends with.

Rows carry ``batch_id = segment - 1``: the micro-batch that a live run reading one segment per
micro-batch from the start gives the segment. Every other column is what any live run writes.

Each step's task function is pure (Arrow in, Arrow out); a task's several kinds of output travel
in one wide Arrow schema, told apart by ``_role``, and are split after the step is cached. The
clock runs over each segment's lines in one task: the log's reader keeps segments whole in a
partition; a frame that does not is repartitioned by segment first.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from decimal import Decimal
from typing import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema

from shared.clock import NO_TIME, Advances, ClockState, advance, line_keys, split_line_keys, tick_summary
from shared.dedup import REMEMBERED_SCHEMA, deduplicate_stream, remembered_from, remembered_from_column
from shared.events import DEAD_LETTER_COLUMNS, EVENT_COLUMNS, EVENT_SCHEMA, UTC_MICROS
from shared.money import MONEY_TYPE
from shared.aggregation import WINDOW_KEY
from shared.spark_arrow import per_key, per_partition
from shared.speed import DUPLICATE_SCHEMA, StreamSettings, clocked_lines
from shared.stream_metrics import BatchFigures, metrics_table
from shared.stream_state import StreamState, state_table
from shared.stream_windows import HISTORY_SCHEMA, LATE_SCHEMA, WINDOW_ROW_SCHEMA, empty_held, judge_pairs, window_step
from shared.windows import KEY_COLUMNS, SessionWindows, micros

__all__ = ["Replay", "replay"]

_CLOCK = [pa.field(name, pa.int64()) for name in ("_line", "_p", "_w", "_w_after")]
_BATCH = pa.field("batch_id", pa.int64())
_ROLE = pa.field("_role", pa.string())
_NEEDED = ["segment", "line_number", *EVENT_COLUMNS[2:], "reject_reason", "heartbeat"]


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
            pa.array([role] * count, pa.string()) if field.name == "_role"
            else table[field.name].cast(field.type) if field.name in table.column_names
            else pa.nulls(count, field.type)
        )
        for field in schema
    }
    return pa.table(columns, schema=schema)


def _by_line(table: pa.Table) -> pa.Table:
    return table.take(pc.sort_indices(table, sort_keys=[("segment", "ascending"), ("line_number", "ascending")]))


def _segments(batches: Iterator[pa.RecordBatch]) -> Iterator[tuple[int, pa.Table]]:
    """The rows of a partition, one segment at a time, in log order."""
    received = list(batches)
    if not received:
        return
    rows = _by_line(pa.Table.from_batches(received))
    segments = rows["segment"].to_numpy()
    bounds = np.flatnonzero(np.concatenate([[True], segments[1:] != segments[:-1], [True]]))
    for first, stop in zip(bounds[:-1], bounds[1:]):
        yield int(segments[first]), rows.slice(first, stop - first)


def _micros(column) -> np.ndarray:
    return column.cast(pa.int64()).fill_null(NO_TIME).to_numpy(zero_copy_only=False)


def _event_times(lines: pa.Table) -> np.ndarray:
    is_event = pc.and_(pc.is_null(lines["reject_reason"]), pc.invert(lines["heartbeat"])).to_numpy(zero_copy_only=False)
    return np.where(is_event, _micros(lines["event_time"]), NO_TIME)


# ----------------------------------------------------------------------------- 1. the clock

_SUMMARY = pa.schema(
    [pa.field("segment", pa.int64()), pa.field("key", pa.int64()), pa.field("p", pa.int64()), pa.field("e", pa.int64()), pa.field("last", pa.bool_())]
)


def _summarise(starts: dict[int, int | None], settings, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    for segment, lines in _segments(batches):
        keys = line_keys(lines["segment"].to_numpy(), lines["line_number"].to_numpy())
        state = ClockState(processing_time=starts[segment])
        pseudo = tick_summary(state, settings, keys, _micros(lines["ingest_time"]), _event_times(lines))
        count = len(pseudo[0])
        last = np.arange(count) == count - 1
        yield pa.RecordBatch.from_arrays([pa.array(np.full(count, segment, np.int64)), *map(pa.array, pseudo), pa.array(last)], schema=_SUMMARY)


@dataclass(frozen=True)
class _Clock:
    """The clock at the start of every segment, and at the end of the log."""

    starts: dict[int, ClockState]
    end: ClockState


def _summary(lines: DataFrame, segments: np.ndarray, starts_p: dict, settings: StreamSettings) -> pa.Table | None:
    """The pseudo-lines of every segment; None when some segment's lines were in two partitions."""
    task = functools.partial(_summarise, starts_p, settings.clock)
    summary = lines.mapInArrow(task, from_arrow_schema(_SUMMARY)).toArrow()
    summary = summary.sort_by([("segment", "ascending"), ("key", "ascending")])
    lasts = summary["segment"].to_numpy()[summary["last"].to_numpy(zero_copy_only=False)]
    tasks_per_segment = np.bincount(np.searchsorted(segments, lasts), minlength=len(segments))
    return None if np.any(tasks_per_segment > 1) else summary


def _clock_states(lines: DataFrame, stats: pa.Table, settings: StreamSettings) -> tuple[_Clock, DataFrame]:
    """The clock at every segment boundary, and ``lines`` with every segment whole in one
    partition (as the log's reader gives them; repartitioned by segment when they are not)."""
    segments = stats["segment"].to_numpy()
    largest = np.maximum.accumulate(stats["max_ingest"].fill_null(NO_TIME).to_numpy(zero_copy_only=False))
    before = np.concatenate([[NO_TIME], largest[:-1]])
    starts_p = {int(s): (None if p == NO_TIME else int(p)) for s, p in zip(segments, before)}
    narrow = ["segment", "line_number", "ingest_time", "event_time", "reject_reason", "heartbeat"]
    summary = _summary(lines.select(*narrow), segments, starts_p, settings)
    if summary is None:
        lines = lines.repartition(max(1, lines.rdd.getNumPartitions()), "segment")
        summary = _summary(lines.select(*narrow), segments, starts_p, settings)
    per_segment = summary["segment"].to_numpy()
    keys, p, e = (summary[c].to_numpy() for c in ("key", "p", "e"))
    bounds = np.searchsorted(per_segment, segments, side="left").tolist() + [len(per_segment)]
    state, starts = ClockState(), {}
    for index, segment in enumerate(segments.tolist()):
        starts[segment] = state
        part = slice(bounds[index], bounds[index + 1])
        state = advance(state, settings.clock, keys[part], p[part], e[part]).state
    return _Clock(starts, state), lines


# ------------------------------------------------------------------- 2. every line on the clock

_CLOCKED = _union(EVENT_SCHEMA, pa.schema([*_CLOCK, _BATCH, pa.field("_max_event", pa.int64()), pa.field("_latest_ingest", pa.int64()), _ROLE]))


def _clock_lines(starts: dict[int, ClockState], settings, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    for segment, lines in _segments(batches):
        state = starts[segment]
        clocked = clocked_lines(lines, state, settings, np.full(lines.num_rows, segment - 1, np.int64))
        advances = clocked.advances
        summary = pa.table(
            {
                "segment": [segment],
                "_w": [int(clocked.clock.watermark[0])],
                "_w_after": [int(clocked.clock.watermark_after[-1])],
                "_max_event": [clocked.clock.state.max_event_time],
                "_latest_ingest": [int(_micros(lines["ingest_time"]).max())],
            }
        )
        steps = pa.table({"_line": advances.keys, "_p": advances.processing_time, "_w_after": advances.watermark_after, "batch_id": advances.batch_id})
        for role, table in (("event", clocked.events), ("advance", steps), ("segment", summary)):
            yield from _pack(role, table, _CLOCKED).to_batches()


# ------------------------------------------------------------------------------ 3. dedup

_DEDUP = _union(DUPLICATE_SCHEMA, pa.schema([*_CLOCK, _BATCH, _ROLE]))
_DELTAS = pa.schema([pa.field("segment", pa.int64()), pa.field("_delta", pa.int64())])


def _state_deltas(created: np.ndarray, gone: np.ndarray, segments: np.ndarray) -> pa.Table:
    """Per segment, how many state rows appear minus how many leave at its end (``gone``: the
    index of the segment after which each row has left; ``len(segments)``: never)."""
    change = np.bincount(created, minlength=len(segments) + 1) - np.bincount(gone, minlength=len(segments) + 1)
    rows = np.flatnonzero(change[: len(segments)])
    return pa.table({"segment": pa.array(segments[rows], pa.int64()), "_delta": pa.array(change[rows], pa.int64())})


def _dedup(horizon: int, table: pa.Table) -> pa.Table:
    """Every copy of the ids in ``table`` (ids seen more than once), in log order."""
    lines = _by_line(table).select([*EVENT_SCHEMA.names, "_line", "_p", "_w", "_w_after", "batch_id"])
    result = deduplicate_stream(lines, REMEMBERED_SCHEMA.empty_table(), horizon)
    return pa.concat_tables([_pack("first", result.firsts, _DEDUP), _pack("duplicate", result.duplicates, _DEDUP)])


def _forgotten(horizon: int, segments: np.ndarray, ends: np.ndarray, firsts: pa.Table) -> pa.Table:
    """Per segment, how many first copies the stream holds in memory: each is forgotten at the
    end of the first segment whose watermark has passed ``remembered_from + horizon``."""
    since = remembered_from(firsts["event_time"].cast(pa.int64()).to_numpy(zero_copy_only=False), firsts["_w"].to_numpy())
    created = np.searchsorted(segments, firsts["segment"].to_numpy())
    gone = np.maximum(np.searchsorted(ends, since + horizon, side="right"), created)
    return _state_deltas(created, gone, segments)


# ------------------------------------------------------------------------------ 4. windows

_OUTCOMES = pa.schema(
    [pa.field("segment", pa.int64()), pa.field("currency", pa.string()), pa.field("_on_time", pa.int64()), pa.field("_late", pa.int64()),
     pa.field("_late_updates", pa.int64()), pa.field("_on_time_amount", MONEY_TYPE), pa.field("_late_amount", MONEY_TYPE)]
)
_WINDOWS = _union(WINDOW_ROW_SCHEMA, LATE_SCHEMA, HISTORY_SCHEMA, _OUTCOMES, pa.schema([pa.field("_delta", pa.int64()), _ROLE]))
_PAIRS = _union(LATE_SCHEMA, _OUTCOMES, pa.schema([pa.field("_line", pa.int64()), pa.field("_p", pa.int64()), _ROLE]))


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


def _windows(settings: StreamSettings, advances: Advances, segments: np.ndarray, ends: np.ndarray, history: bool, table: pa.Table) -> pa.Table:
    """Every event of the keys in ``table``, line by line (sessions, or the history asked for)."""
    events = _by_line(table).select([*EVENT_SCHEMA.names, "_line", "_p", "_w", "_w_after", "batch_id"])
    run = window_step(settings.window, settings.allowed_lateness, events, empty_held(), advances, history=history)
    rows = run.changes.filter(pc.invert(run.changes["_delete"]))
    lifetimes = run.lifetimes
    created = np.searchsorted(segments, split_line_keys(lifetimes["created"].to_numpy())[0])
    replaced = lifetimes["replaced"].to_numpy()
    expired = np.searchsorted(ends, lifetimes["expires"].to_numpy(), side="left")
    gone = np.where(replaced != NO_TIME, np.searchsorted(segments, split_line_keys(np.maximum(replaced, 0))[0]), expired)
    parts = [
        ("window", rows),
        ("late", run.late),
        ("held", run.held),
        ("outcome", _outcome_sums(run.outcomes)),
        ("state", _state_deltas(created, np.maximum(gone, created), segments)),
    ]
    if run.history is not None:
        parts.append(("history", run.history))
    return pa.concat_tables([_pack(role, part, _WINDOWS) for role, part in parts])


def _judge(settings: StreamSettings, table: pa.Table) -> pa.Table:
    """Fixed windows: the pairs of any slice of the first copies, judged on their own."""
    judged = judge_pairs(settings.window, settings.allowed_lateness, table)
    pairs = judged.on_time.select([*WINDOW_KEY, "amount", "_p", "batch_id", "_line"])
    return pa.concat_tables(
        [_pack("pair", pairs, _PAIRS), _pack("late", judged.late, _PAIRS), _pack("outcome", _outcome_sums(judged.outcomes), _PAIRS)]
    )


@dataclass(frozen=True)
class _WindowFrames:
    windows: pa.Table
    late: DataFrame
    outcomes: DataFrame
    held: pa.Table
    history: DataFrame | None
    state: DataFrame | pa.Table
    cached: DataFrame


def _fixed_windows(firsts: DataFrame, settings: StreamSettings, segments: np.ndarray, ends: np.ndarray, final: int | None) -> _WindowFrames:
    """Fixed windows without a history: pairs judged where the events are (no shuffle of the
    events), on-time pairs summed per window by Spark."""
    judged = per_partition(firsts, functools.partial(_judge, settings), from_arrow_schema(_PAIRS)).persist()
    totals = judged.where("_role = 'pair'").groupBy(*WINDOW_KEY).agg(
        F.count(F.lit(1)).alias("event_count"),
        F.sum("amount").cast("decimal(38,6)").alias("amount_total"),
        F.max("batch_id").alias("updated_batch_id"),
        F.max("_p").alias("_p"),
        F.min("_line").alias("_line"),
    ).toArrow()
    ends_of = micros(totals["window_end"])
    final_or_none = NO_TIME if final is None else final
    rows = pa.table(
        {
            **{name: totals[name] for name in WINDOW_KEY},
            "event_count": totals["event_count"],
            "amount_total": totals["amount_total"],
            "status": pa.array(np.where((final_or_none != NO_TIME) & (final_or_none >= ends_of), "final", "open"), pa.string()),
            "updated_batch_id": totals["updated_batch_id"],
            "updated_ingest_time": totals["_p"].cast(pa.timestamp("us", tz="UTC")),
        }
    ).cast(WINDOW_ROW_SCHEMA)
    expires = ends_of + settings.allowed_lateness
    held = rows.filter(pa.array(expires > final_or_none)) if final is not None else rows
    created = np.searchsorted(segments, split_line_keys(totals["_line"].to_numpy())[0])
    gone = np.maximum(np.searchsorted(ends, expires, side="left"), created)
    return _WindowFrames(
        windows=rows,
        late=judged.where("_role = 'late'").select(*LATE_SCHEMA.names),
        outcomes=judged.where("_role = 'outcome'"),
        held=held,
        history=None,
        state=_state_deltas(created, gone, segments),
        cached=judged,
    )


def _line_by_line(firsts: DataFrame, settings: StreamSettings, advances: Advances, segments: np.ndarray, ends: np.ndarray, history: bool) -> _WindowFrames:
    windowed = per_key(
        firsts, list(KEY_COLUMNS), functools.partial(_windows, settings, advances, segments, ends, history), from_arrow_schema(_WINDOWS)
    ).persist()
    return _WindowFrames(
        windows=windowed.where("_role = 'window'").select(*WINDOW_ROW_SCHEMA.names).toArrow().cast(WINDOW_ROW_SCHEMA),
        late=windowed.where("_role = 'late'").select(*LATE_SCHEMA.names),
        outcomes=windowed.where("_role = 'outcome'"),
        held=windowed.where("_role = 'held'").select(*WINDOW_ROW_SCHEMA.names).toArrow().cast(WINDOW_ROW_SCHEMA),
        history=windowed.where("_role = 'history'").select(*HISTORY_SCHEMA.names) if history else None,
        state=windowed.where("_role = 'state'").select("segment", "_delta"),
        cached=windowed,
    )


# ------------------------------------------------------------------------------ the whole


@dataclass(frozen=True)
class Replay:
    """The replay's output: frames for the stream's tables, plus the metrics and the end state.

    ``first_copies``: the events the stream counted once (``EVENT_SCHEMA`` plus
    ``processing_time``, the line's moment on the log's clock), valid until ``release``."""

    dead_letters: DataFrame
    duplicates: DataFrame
    late_events: DataFrame
    windows: pa.Table
    history: DataFrame | None
    metrics: pa.Table
    state: pa.Table
    first_copies: DataFrame
    cached: tuple[DataFrame, ...]

    def release(self) -> None:
        for frame in self.cached:
            frame.unpersist()


def _stats(parsed: DataFrame) -> pa.Table:
    stats = parsed.groupBy("segment").agg(
        F.count(F.lit(1)).alias("lines"),
        F.max(F.unix_micros("ingest_time")).alias("max_ingest"),
        F.sum(F.col("reject_reason").isNotNull().cast("long")).alias("dead_letters"),
        F.sum(F.col("heartbeat").cast("long")).alias("heartbeats"),
    )
    return stats.toArrow().sort_by("segment")


def _money(rows: list[dict], column: str) -> list[tuple[str, Decimal]]:
    return sorted((r["currency"], r[column]) for r in rows if r[column] is not None and r["currency"] is not None)


def replay(parsed: DataFrame, settings: StreamSettings, *, history: bool = False) -> Replay:
    """The stream's rows for the whole log (``parsed``: ``parse_events`` output, cached by the
    caller), as a live run reading one segment per micro-batch writes them."""
    stats = _stats(parsed)
    segments = stats["segment"].to_numpy()
    clock, lines = _clock_states(parsed.select(*_NEEDED), stats, settings)
    clocked = lines.mapInArrow(
        functools.partial(_clock_lines, clock.starts, settings.clock), from_arrow_schema(_CLOCKED)
    ).persist()
    steps = clocked.where("_role = 'advance'").select("_line", "_p", "_w_after", "batch_id").toArrow().sort_by("_line")
    per_segment = {r["segment"]: r for r in clocked.where("_role = 'segment'").select("segment", "_w", "_w_after", "_max_event", "_latest_ingest").toArrow().to_pylist()}
    ends = np.array([per_segment[int(s)]["_w_after"] for s in segments], dtype=np.int64)
    final = clock.end.watermark_after(settings.clock)
    advances = Advances(
        keys=steps["_line"].to_numpy(), processing_time=steps["_p"].to_numpy(), watermark_after=steps["_w_after"].to_numpy(),
        batch_id=steps["batch_id"].to_numpy(), before=None, after=final,
    )

    # Dedup: only ids seen more than once need the rule, in log order; every other line is a first copy.
    columns = [*EVENT_SCHEMA.names, "_line", "_p", "_w", "_w_after", "batch_id"]
    events = clocked.where("_role = 'event'").select(*columns)
    repeated = events.groupBy("event_id").count().where("count > 1").select("event_id", F.lit(True).alias("_repeated"))
    flagged = events.join(F.broadcast(repeated), "event_id", "left")
    contested = per_key(
        flagged.where("_repeated").select(*columns), ["event_id"], functools.partial(_dedup, settings.dedup_horizon), from_arrow_schema(_DEDUP)
    ).persist()
    firsts = flagged.where("_repeated IS NULL").select(*columns).unionByName(contested.where("_role = 'first'").select(*columns))
    horizon = settings.dedup_horizon
    id_deltas = per_partition(
        firsts.select("segment", "event_time", "_w"), functools.partial(_forgotten, horizon, segments, ends), from_arrow_schema(_DELTAS)
    ).groupBy("segment").agg(F.sum("_delta").alias("_delta")).toArrow()
    since = remembered_from_column("event_time", "_w")
    kept = firsts.where(F.lit(True) if final is None else since >= F.lit(final - horizon)).select(
        *EVENT_SCHEMA.names, F.timestamp_micros(since).alias("remembered_from")
    ).toArrow()
    if history or isinstance(settings.window, SessionWindows):
        windows = _line_by_line(firsts, settings, advances, segments, ends, history)
    else:
        windows = _fixed_windows(firsts, settings, segments, ends, final)

    duplicates = contested.where("_role = 'duplicate'").select(*DUPLICATE_SCHEMA.names)
    dup_sums = duplicates.groupBy("segment", "currency").agg(F.count(F.lit(1)).alias("n"), F.sum("amount").cast("decimal(38,6)").alias("money")).collect()
    outcomes = windows.outcomes.groupBy("segment", "currency").agg(
        *[F.sum(c).alias(c) for c in ("_on_time", "_late", "_late_updates")],
        *[F.sum(c).cast("decimal(38,6)").alias(c) for c in ("_on_time_amount", "_late_amount")],
    ).collect()
    state_change: dict[int, int] = {}
    window_deltas = windows.state if isinstance(windows.state, pa.Table) else windows.state.toArrow()
    for part in (window_deltas, id_deltas):
        for segment, delta in zip(part["segment"].to_pylist(), part["_delta"].to_pylist()):
            state_change[segment] = state_change.get(segment, 0) + delta

    metrics = _metrics(stats, per_segment, dup_sums, outcomes, state_change)
    end_state = StreamState(clock.end, kept.cast(REMEMBERED_SCHEMA), windows.held)
    dead = parsed.where("reject_reason IS NOT NULL").select(*DEAD_LETTER_COLUMNS, (F.col("segment") - 1).alias("batch_id"))
    return Replay(
        dead_letters=dead,
        duplicates=duplicates,
        late_events=windows.late,
        windows=windows.windows,
        history=windows.history,
        metrics=metrics,
        state=state_table(end_state),
        first_copies=firsts.select(*EVENT_SCHEMA.names, F.timestamp_micros("_p").alias("processing_time")),
        cached=(clocked, contested, windows.cached),
    )


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

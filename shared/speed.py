"""One micro-batch of the speed layer, as DataFrames (no I/O).

Spark's ``withWatermark`` would drop late rows; this step keeps every line instead. Its state is
the set of remembered first copies (``STATE_COLUMNS``): events whose windows can still change
(``in_window_state``) and events kept only so that a later copy is recognised as a duplicate
(within ``dedup_horizon`` of the watermark). Given the lines of batch ``b``, that state and the
watermarks before and after ``b``, ``speed_step`` says where each line goes:

* ``dead_letters``: lines that fail validation;
* ``duplicates``: later copies of a remembered or earlier-in-batch ``event_id`` (dedup comes
  before lateness: a resent late event is a duplicate, not a second late event);
* ``late_events``: the side output, one row per (event, window) the watermark had closed;
* on-time events, which recompute their windows into ``window_updates`` (rows to upsert into
  ``speed_aggregates``, plus ``_delete`` rows for sessions that merged away).

``event_outcomes`` has one row per first copy (``event_id, amount, currency``): ``late`` when
none of its windows took it, and ``late_updates``, the windows it updated within the allowed
lateness.

Sessions merge: an event that overlaps a session still in state joins it even if its own
would-be session ``[t, t + gap)`` has closed; otherwise it is late when that one has.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from shared.aggregation import AMOUNT_TOTAL_TYPE, aggregate_windows
from shared.dedup import mark_duplicates
from shared.events import EVENT_COLUMNS, event_columns, rejected_lines, valid_events
from shared.watermark import is_late, is_late_update, lateness_seconds, window_status
from shared.windows import KEY_COLUMNS, SessionWindows, TumblingWindows, WindowSpec, assign_windows

__all__ = ["SpeedSettings", "SpeedBatch", "STATE_COLUMNS", "WINDOW_KEY", "speed_step", "empty_state"]

STATE_COLUMNS = EVENT_COLUMNS + ("in_window_state", "batch_id")
WINDOW_KEY = ("window_start", "window_end") + KEY_COLUMNS


@dataclass(frozen=True)
class SpeedSettings:
    window: WindowSpec
    watermark_delay: int
    allowed_lateness: int
    dedup_horizon: int


@dataclass(frozen=True)
class SpeedBatch:
    dead_letters: DataFrame
    duplicates: DataFrame
    late_events: DataFrame
    event_outcomes: DataFrame
    window_updates: DataFrame
    state: DataFrame


def empty_state(spark) -> DataFrame:
    schema = (
        "segment long, line_number long, event_id string, account_id string, event_type string, "
        "amount decimal(20,6), currency string, event_time timestamp, ingest_time timestamp, "
        "in_window_state boolean, batch_id long"
    )
    return spark.createDataFrame([], schema).select(*STATE_COLUMNS)


def _ts(micros: int | None) -> Column:
    return F.timestamp_micros(F.lit(micros).cast("long"))


def _last_window_end(spec: WindowSpec) -> Column:
    """End of the last fixed window an event is in (tumbling and sliding)."""
    t = F.unix_micros("event_time")
    step = spec.size if isinstance(spec, TumblingWindows) else spec.slide
    return F.timestamp_micros(t - F.pmod(t, F.lit(step)) + F.lit(spec.size))


def _open_sessions(events: DataFrame, spec: SessionWindows) -> DataFrame:
    return events.transform(assign_windows(spec)).select(*WINDOW_KEY).distinct()


def _classify_windows(fresh: DataFrame, pool: DataFrame, settings: SpeedSettings, watermark: int | None) -> DataFrame:
    """(event, window) rows of the fresh events with ``_late`` and ``_late_update`` flags."""
    spec, lateness = settings.window, settings.allowed_lateness
    if isinstance(spec, SessionWindows):
        proto = fresh.withColumn("window_start", F.col("event_time")).withColumn(
            "window_end", F.timestamp_micros(F.unix_micros("event_time") + F.lit(spec.gap))
        )
        sessions = _open_sessions(pool, spec).select(
            *KEY_COLUMNS, F.col("window_start").alias("_s"), F.col("window_end").alias("_e")
        )
        joins = proto.join(
            sessions,
            [proto[k] == sessions[k] for k in KEY_COLUMNS]
            + [
                proto["event_time"] < sessions["_e"],
                F.unix_micros(proto["event_time"]) + F.lit(spec.gap) > F.unix_micros(sessions["_s"]),
            ],
            "left_semi",
        ).select("event_id", F.lit(True).alias("_merges"))
        flagged = proto.join(joins, "event_id", "left").fillna(False, ["_merges"])
        return flagged.select(
            *fresh.columns,
            "window_start",
            "window_end",
            (~F.col("_merges") & is_late("window_end", watermark, lateness)).alias("_late"),
            F.lit(False).alias("_late_update"),
        )
    return fresh.transform(assign_windows(spec)).select(
        "*",
        is_late("window_end", watermark, lateness).alias("_late"),
        is_late_update("window_end", watermark, lateness).alias("_late_update"),
    )


def _window_updates(on_time: DataFrame, pool: DataFrame, spec: WindowSpec, next_watermark: int | None, batch_id: int) -> DataFrame:
    """Recomputed rows of every window the on-time events touched (+ ``_delete`` rows)."""
    if isinstance(spec, SessionWindows):
        join_key = list(KEY_COLUMNS)
        keys = on_time.select(*KEY_COLUMNS).distinct()
        before = pool.join(keys, list(KEY_COLUMNS), "left_semi")
        events = before.unionByName(on_time.select(*event_columns()))
        totals = events.transform(assign_windows(spec)).transform(aggregate_windows)
        merged_away = _open_sessions(before, spec).join(totals, list(WINDOW_KEY), "left_anti")
        upserts = totals.withColumn("_delete", F.lit(False))
        deletes = merged_away.select(
            *WINDOW_KEY,
            F.lit(0).cast("long").alias("event_count"),
            F.lit(0).cast(AMOUNT_TOTAL_TYPE).alias("amount_total"),
            F.lit(True).alias("_delete"),
        )
        rows = upserts.unionByName(deletes)
    else:
        join_key = list(WINDOW_KEY)
        touched = on_time.select(*WINDOW_KEY).distinct()
        windows = pool.transform(assign_windows(spec)).select(*event_columns(), "window_start", "window_end")
        windows = windows.unionByName(on_time.select(*event_columns(), "window_start", "window_end"))
        rows = windows.join(touched, list(WINDOW_KEY), "left_semi").transform(aggregate_windows).withColumn("_delete", F.lit(False))
    fresh_times = on_time.groupBy(*join_key).agg(F.max("ingest_time").alias("updated_ingest_time"))
    return rows.join(fresh_times, join_key, "left").select(
        *WINDOW_KEY,
        "event_count",
        "amount_total",
        window_status("window_end", next_watermark).alias("status"),
        F.lit(batch_id).cast("long").alias("updated_batch_id"),
        "updated_ingest_time",
        "_delete",
    )


def _retained(state: DataFrame, settings: SpeedSettings, next_watermark: int | None) -> DataFrame:
    """State after the batch: drop windows that can no longer change, ids past the horizon."""
    if next_watermark is None:
        return state
    spec, horizon = settings.window, settings.dedup_horizon
    limit = F.lit(next_watermark - settings.allowed_lateness).cast("long")
    if isinstance(spec, SessionWindows):
        sessions = state.where("in_window_state").transform(assign_windows(spec))
        alive = sessions.where(F.unix_micros("window_end") > limit).select("event_id", F.lit(True).alias("_alive"))
        state = state.join(alive, "event_id", "left")
        window_alive = F.coalesce(F.col("_alive"), F.lit(False))
    else:
        window_alive = F.col("in_window_state") & (F.unix_micros(_last_window_end(spec)) > limit)
    remembered = F.unix_micros("event_time") >= F.lit(next_watermark - horizon).cast("long")
    return (
        state.withColumn("in_window_state", window_alive)
        .where(F.col("in_window_state") | remembered)
        .select(*STATE_COLUMNS)
    )


def speed_step(
    parsed: DataFrame,
    state: DataFrame,
    settings: SpeedSettings,
    batch_id: int,
    watermark: int | None,
    next_watermark: int | None,
    reuse: Callable[[DataFrame], DataFrame] = lambda frame: frame,
) -> SpeedBatch:
    """Where every line of micro-batch ``batch_id`` goes (``parsed``: ``parse_events`` output).

    ``reuse`` is applied to the intermediate results several outputs share (a caller that
    materialises every output passes ``DataFrame.persist``).
    """
    batch = F.lit(batch_id).cast("long")
    prior = state.select(*event_columns(), F.lit(False).alias("_new"))
    marked = prior.unionByName(parsed.transform(valid_events).withColumn("_new", F.lit(True))).transform(mark_duplicates)
    marked = reuse(marked.where("_new").drop("_new"))
    fresh = marked.where("NOT is_duplicate").select(*event_columns())
    duplicates = marked.where("is_duplicate").drop("is_duplicate").withColumn("batch_id", batch)

    pool = state.where("in_window_state").select(*event_columns())
    windows = reuse(_classify_windows(fresh, pool, settings, watermark))
    late_events = windows.where("_late").select(
        *event_columns(),
        "window_start",
        "window_end",
        _ts(watermark).alias("watermark"),
        lateness_seconds("event_time", watermark).alias("lateness_seconds"),
        batch.alias("batch_id"),
    )
    outcomes = windows.groupBy("event_id", "amount", "currency").agg(
        F.bool_and("_late").alias("late"), F.sum(F.col("_late_update").cast("long")).alias("late_updates")
    )
    late_ids = outcomes.where("late")
    on_time = windows.where("NOT _late").drop("_late")
    if isinstance(settings.window, SessionWindows):
        on_time = on_time.drop("window_start", "window_end")
    updates = _window_updates(on_time.drop("_late_update"), pool, settings.window, next_watermark, batch_id)

    flagged = fresh.join(late_ids.select("event_id", F.lit(False).alias("in_window_state")), "event_id", "left")
    remembered = state.unionByName(
        flagged.fillna(True, ["in_window_state"]).withColumn("batch_id", batch).select(*STATE_COLUMNS)
    )
    return SpeedBatch(
        dead_letters=parsed.transform(rejected_lines).withColumn("batch_id", batch),
        duplicates=duplicates,
        late_events=late_events,
        event_outcomes=outcomes,
        window_updates=updates,
        state=_retained(remembered, settings, next_watermark),
    )

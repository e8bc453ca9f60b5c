"""The speed layer's step on Spark's executors: the clock, dedup and windows as stateful operators.

``shared.speed.stream_step`` runs a micro-batch in one Python process against the whole state.
``keyed_speed`` runs the same three steps as three ``transformWithStateInPandas`` operators in
the streaming query itself, each holding its part of the state in Spark's state store (RocksDB,
checkpointed with the query), so the work and the state spread over the executors:

1. **The clock** (``clocked_batch``) is one group: every line's watermark depends on every
   earlier line of the log, so one task runs it over the whole micro-batch, as NumPy over a few
   columns. Its state is the ``ClockState``, and the number of buckets the others were given
   (their state is kept per bucket: a query started again with another number is refused).
2. **Dedup** (``deduplicate_stream``, ``remembered_after``) is keyed by the bucket of
   ``event_id`` (``shared.buckets``): every copy of an id meets the copies remembered of it.
3. **Windows** (``window_step``) are keyed by the bucket of ``account_id, currency``: a window,
   and a session, belongs to one account and currency.

Between them the rows travel as Arrow tables in binary cells (``shared.arrow_blobs``): one cell
per kind of rows and bucket, so a bucket costs a few cells, not a Python call per row, and every
type stays exact. Every bucket of both stateful steps is visited in every micro-batch (the clock
sends each the watermark's advances), so windows the watermark finalises and copies it forgets
leave their bucket's state in the batch they would leave the driver's.

A ``transformWithStateInPandas`` operator in event-time mode filters rows behind Spark's own
watermark before the function sees them; these run with ``timeMode="None"`` and judge lateness by
the log's clock alone (``shared.clock``): no row is dropped.

A stateful function learns its micro-batch from its task (the local property
``streaming.sql.batchId``); every partition of the log sends the clock a cell, with or without
lines, so the clock runs in every micro-batch, and the receiver (``shared.keyed_batch``) checks
the batch id the clock saw against the one ``foreachBatch`` was given.

What ``keyed_speed`` emits per micro-batch, as ``(key, kind, blob)`` rows, is what
``stream_step`` returns, in two sizes. Rows that grow with the traffic or the state stay on the
executors (``shared.keyed_batch`` writes them from there): the dead letters, duplicates and late
events, and the state after the batch (``state_clock``, ``state_remembered`` per dedup bucket,
``state_windows`` per window bucket). What the driver reads is small: the clock's figures
(``batch``), lines per segment (``segments``), each bucket's ``tally`` of money and its
``counts`` (``COUNTS_SCHEMA``), and the window changes the sink merges.
"""

from __future__ import annotations

from collections.abc import Iterator

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from pyspark import TaskContext
from pyspark.sql import DataFrame
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.streaming import StatefulProcessor

from shared.arrow_blobs import BLOB_DDL, blob_frame, by_kind, decode, encode, packed
from shared.buckets import buckets, key_buckets
from shared.clock import Advances, ClockState
from shared.dedup import REMEMBERED_SCHEMA, deduplicate_stream
from shared.speed import (
    DUPLICATE_SCHEMA,
    StreamSettings,
    clocked_batch,
    duplicate_rows,
    remembered_after,
)
from shared.stream_metrics import segment_lines, tally
from shared.stream_state import CLOCK_FIELDS, clock_table
from shared.stream_windows import OUTCOME_SCHEMA, WINDOW_ROW_SCHEMA, open_windows, window_step

__all__ = ["DEFAULT_BUCKETS", "COUNTS_SCHEMA", "query_settings", "keyed_speed", "in_order"]

DEFAULT_BUCKETS = 8
_WINDOW_KEY = ["account_id", "currency"]
_CLOCK_DDL = ", ".join(f"{name} long" for name in (*CLOCK_FIELDS, "buckets"))
_STATE_DDL = "blob binary"
_PASSED = ("dead_letters", "segments", "batch", "state_clock", "duplicates", "tally", "counts", "state_remembered")
# What a bucket counts of its state (``counts``: one row per bucket, added up by the driver).
COUNTS_SCHEMA = pa.schema([pa.field("state_rows", pa.int64()), pa.field("open_windows", pa.int64())])


def in_order(tables: list[pa.Table], keys: list[tuple[str, str]]) -> pa.Table:
    """``tables`` as one, sorted by ``keys``."""
    table = pa.concat_tables(tables)
    return table.take(pc.sort_indices(table, sort_keys=keys))


def _counts(state_rows: int, open_windows: int = 0) -> pa.Table:
    return pa.table({"state_rows": [state_rows], "open_windows": [open_windows]}, schema=COUNTS_SCHEMA)


def _passed(parts: dict[str, list[pa.Table]], key: int) -> list[tuple[int, str, pa.Table]]:
    return [(key, kind, table) for kind in _PASSED for table in parts.get(kind, [])]


class _Clock(StatefulProcessor):
    """Step 1, one group: the clock over the micro-batch's lines, in log order."""

    def __init__(self, settings: StreamSettings, count: int) -> None:
        self.settings, self.count = settings, count

    def init(self, handle) -> None:
        self.clock = handle.getValueState("clock", _CLOCK_DDL)

    def handleInputRows(self, key, rows, timerValues) -> Iterator[pd.DataFrame]:
        stored = self.clock.get() if self.clock.exists() else None
        if stored is not None and stored[-1] != self.count:
            raise RuntimeError(
                f"the query's state is kept in {stored[-1]} buckets per step, not {self.count}: start it over on "
                "new tables and a new checkpoint"
            )
        state = ClockState(*stored[: len(CLOCK_FIELDS)]) if stored is not None else ClockState()
        batch_id = int(TaskContext.get().getLocalProperty("streaming.sql.batchId"))
        batch = clocked_batch(pa.concat_tables(by_kind(rows)["lines"]), state, self.settings, batch_id)
        after = batch.lines.clock.state
        self.clock.update((*(getattr(after, name) for name in CLOCK_FIELDS), self.count))
        events, advances = batch.lines.events, batch.lines.advances.table()
        dead_letters = batch.dead_letters
        figures = {
            "batch_id": batch_id,
            "input_lines": batch.input_lines,
            "heartbeats": batch.heartbeats,
            "dead_letters": dead_letters.num_rows,
            "watermark": batch.watermark,
            "next_watermark": batch.next_watermark,
            "max_event_time": after.max_event_time,
        }
        owner = buckets(events["event_id"], self.count)
        yield blob_frame(
            [
                (0, "dead_letters", dead_letters),
                (0, "segments", segment_lines(batch.parsed)),
                (0, "batch", pa.table({name: pa.array([value], pa.int64()) for name, value in figures.items()})),
                (0, "state_clock", clock_table(after)),
                *[(b, "events", events.filter(pa.array(owner == b))) for b in range(self.count)],
                *[(b, "advances", advances) for b in range(self.count)],
            ]
        )


class _BucketStep(StatefulProcessor):
    """A stateful step by bucket: its state one table (``schema``) kept as one value, read before
    the bucket's cells and written after them; the cells it does not consume passed on."""

    name: str
    schema: pa.Schema

    def __init__(self, settings: StreamSettings, count: int) -> None:
        self.settings, self.count = settings, count

    def init(self, handle) -> None:
        self.value = handle.getValueState(self.name, _STATE_DDL)

    def handleInputRows(self, key, rows, timerValues) -> Iterator[pd.DataFrame]:
        parts, bucket = by_kind(rows), int(key[0])
        stored = decode(self.value.get()[0]).cast(self.schema) if self.value.exists() else self.schema.empty_table()
        state, emitted = self.step(parts, bucket, stored)
        self.value.update((encode(state),))
        yield blob_frame([*_passed(parts, bucket), *emitted])

    def step(self, parts: dict[str, list[pa.Table]], bucket: int, stored: pa.Table):
        """The state after the bucket's cells (``parts``), and the ``(key, kind, table)`` cells it emits."""
        raise NotImplementedError


class _Dedup(_BucketStep):
    """Step 2, by bucket of ``event_id``: the bucket's copies against those it remembers."""

    name, schema = "remembered", REMEMBERED_SCHEMA

    def step(self, parts, bucket, remembered):
        events = in_order(parts["events"], [("_line", "ascending")])
        advances = parts["advances"][0]
        horizon = self.settings.dedup_horizon
        dedup = deduplicate_stream(events, remembered, horizon)
        duplicates = duplicate_rows(dedup.duplicates)
        kept = remembered_after(remembered, dedup.firsts, Advances.from_table(advances).after, horizon)
        owner = key_buckets(dedup.firsts, _WINDOW_KEY, self.count)
        return kept, [
            (bucket, "duplicates", duplicates),
            (bucket, "tally", tally(OUTCOME_SCHEMA.empty_table(), duplicates)),
            (bucket, "counts", _counts(kept.num_rows)),
            (bucket, "state_remembered", kept),
            *[(b, "firsts", dedup.firsts.filter(pa.array(owner == b))) for b in range(self.count)],
            (bucket, "advances", advances),
        ]


class _Windows(_BucketStep):
    """Step 3, by bucket of ``account_id, currency``: the bucket's first copies against its windows."""

    name, schema = "held", WINDOW_ROW_SCHEMA

    def step(self, parts, bucket, held):
        firsts = in_order(parts["firsts"], [("_line", "ascending")])
        settings = self.settings
        run = window_step(
            settings.window, settings.allowed_lateness, firsts, held, Advances.from_table(parts["advances"][0])
        )
        return run.held, [
            (bucket, "window_changes", run.changes),
            (bucket, "late_events", run.late),
            (bucket, "tally", tally(run.outcomes, DUPLICATE_SCHEMA.empty_table())),
            (bucket, "counts", _counts(run.held.num_rows, open_windows(run.held))),
            (bucket, "state_windows", run.held),
        ]


def query_settings(spark) -> dict[str, str]:
    """The settings a query of these operators starts with, fixed into its checkpoint then: the
    RocksDB state store (Spark refuses these operators on any other), committed as a changelog
    per micro-batch with snapshots uploaded in the background (a snapshot per commit cost 0.1-0.3 s
    per task), and a state partition per core of the cluster (every partition of every stateful
    step is a task in every micro-batch, with or without rows)."""
    return {
        "spark.sql.streaming.stateStore.providerClass": (
            "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
        ),
        "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
        "spark.sql.shuffle.partitions": str(max(1, spark.sparkContext.defaultParallelism)),
    }


def keyed_speed(parsed: DataFrame, settings: StreamSettings, count: int = DEFAULT_BUCKETS) -> DataFrame:
    """The three steps over a stream of ``parse_events`` rows, as ``(key, kind, blob)`` rows per
    micro-batch (the module docstring); ``count`` buckets per stateful step. The query starts with
    ``query_settings``."""
    step = lambda frame, processor: frame.groupBy("key").transformWithStateInPandas(  # noqa: E731
        processor, BLOB_DDL, "Append", "None"
    )
    blobs = parsed.mapInArrow(packed(to_arrow_schema(parsed.schema, timezone="UTC")), BLOB_DDL)
    return step(step(step(blobs, _Clock(settings, count)), _Dedup(settings, count)), _Windows(settings, count))

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
lines, so the clock runs in every micro-batch, and the receiver (``KeyedBatch.of``) checks the
batch id the clock saw against the one ``foreachBatch`` was given.

What ``keyed_speed`` emits per micro-batch, as ``(key, kind, blob)`` rows: the dead letters, the
lines' segments and ingest times (``lines_seen``), the batch's watermarks (``batch``), the
duplicates, late events, window changes and outcomes, and the state after it (``state_clock``,
``state_remembered`` per dedup bucket, ``state_windows`` per window bucket): what ``stream_step``
returns, which ``keyed_batch`` puts back together as a ``StreamBatch``.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
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
from shared.events import UTC_MICROS
from shared.speed import (
    DEAD_LETTER_SCHEMA,
    DUPLICATE_SCHEMA,
    LATE_SCHEMA,
    WINDOW_CHANGE_SCHEMA,
    StreamBatch,
    StreamSettings,
    clocked_batch,
    duplicate_rows,
    remembered_after,
)
from shared.stream_state import CLOCK_FIELDS, StreamState
from shared.stream_windows import OUTCOME_SCHEMA, WINDOW_ROW_SCHEMA, window_step

__all__ = ["DEFAULT_BUCKETS", "query_settings", "keyed_speed", "keyed_batch", "KeyedBatch"]

DEFAULT_BUCKETS = 8
_WINDOW_KEY = ["account_id", "currency"]
_CLOCK_DDL = ", ".join(f"{name} long" for name in (*CLOCK_FIELDS, "buckets"))
_STATE_DDL = "blob binary"
_PASSED = ("dead_letters", "lines_seen", "batch", "state_clock", "duplicates", "state_remembered")
_LINE_ORDER = [("segment", "ascending"), ("line_number", "ascending")]


def _in_order(tables: list[pa.Table], keys: list[tuple[str, str]]) -> pa.Table:
    table = pa.concat_tables(tables)
    return table.take(pc.sort_indices(table, sort_keys=keys))


def _advances_table(advances: Advances) -> pa.Table:
    """The watermark's advances of a batch as a table; ``before``/``after`` in its metadata."""
    metadata = {
        name: "" if value is None else str(value)
        for name, value in (("before", advances.before), ("after", advances.after))
    }
    columns = {
        "keys": advances.keys,
        "processing_time": advances.processing_time,
        "watermark_after": advances.watermark_after,
        "batch_id": advances.batch_id,
    }
    table = pa.table(
        {name: pa.array(np.asarray(values, dtype=np.int64), pa.int64()) for name, values in columns.items()}
    )
    return table.replace_schema_metadata(metadata)


def _advances_of(table: pa.Table) -> Advances:
    metadata = table.schema.metadata or {}
    bound = lambda name: int(metadata[name]) if metadata.get(name) else None  # noqa: E731
    return Advances(
        keys=table["keys"].to_numpy(),
        processing_time=table["processing_time"].to_numpy(),
        watermark_after=table["watermark_after"].to_numpy(),
        batch_id=table["batch_id"].to_numpy(),
        before=bound(b"before"),
        after=bound(b"after"),
    )


def _stored(value, schema: pa.Schema) -> pa.Table:
    """A bucket's state table, as ``schema`` (empty before its first micro-batch)."""
    return decode(value.get()[0]).cast(schema) if value.exists() else schema.empty_table()


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
        events, advances = batch.lines.events, _advances_table(batch.lines.advances)
        figures = pa.table(
            {
                "batch_id": pa.array([batch_id], pa.int64()),
                "input_lines": pa.array([batch.input_lines], pa.int64()),
                "heartbeats": pa.array([batch.heartbeats], pa.int64()),
                "watermark": pa.array([batch.watermark], pa.int64()),
                "next_watermark": pa.array([batch.next_watermark], pa.int64()),
            }
        )
        clock_row = pa.table({name: pa.array([getattr(after, name)], pa.int64()) for name in CLOCK_FIELDS})
        owner = buckets(events["event_id"], self.count)
        yield blob_frame(
            [
                (0, "dead_letters", batch.dead_letters),
                (0, "lines_seen", batch.parsed.select(["segment", "ingest_time"])),
                (0, "batch", figures),
                (0, "state_clock", clock_row),
                *[(b, "events", events.filter(pa.array(owner == b))) for b in range(self.count)],
                *[(b, "advances", advances) for b in range(self.count)],
            ]
        )


class _Dedup(StatefulProcessor):
    """Step 2, by bucket of ``event_id``: the bucket's copies against those it remembers."""

    def __init__(self, settings: StreamSettings, count: int) -> None:
        self.settings, self.count = settings, count

    def init(self, handle) -> None:
        self.remembered = handle.getValueState("remembered", _STATE_DDL)

    def handleInputRows(self, key, rows, timerValues) -> Iterator[pd.DataFrame]:
        parts, bucket = by_kind(rows), int(key[0])
        events = _in_order(parts["events"], [("_line", "ascending")])
        advances = parts["advances"][0]
        remembered = _stored(self.remembered, REMEMBERED_SCHEMA)
        horizon = self.settings.dedup_horizon
        dedup = deduplicate_stream(events, remembered, horizon)
        kept = remembered_after(remembered, dedup.firsts, _advances_of(advances).after, horizon)
        self.remembered.update((encode(kept),))
        owner = key_buckets(dedup.firsts, _WINDOW_KEY, self.count)
        yield blob_frame(
            [
                *_passed(parts, bucket),
                (bucket, "duplicates", duplicate_rows(dedup.duplicates)),
                (bucket, "state_remembered", kept),
                *[(b, "firsts", dedup.firsts.filter(pa.array(owner == b))) for b in range(self.count)],
                (bucket, "advances", advances),
            ]
        )


class _Windows(StatefulProcessor):
    """Step 3, by bucket of ``account_id, currency``: the bucket's first copies against its windows."""

    def __init__(self, settings: StreamSettings) -> None:
        self.settings = settings

    def init(self, handle) -> None:
        self.held = handle.getValueState("held", _STATE_DDL)

    def handleInputRows(self, key, rows, timerValues) -> Iterator[pd.DataFrame]:
        parts, bucket = by_kind(rows), int(key[0])
        firsts = _in_order(parts["firsts"], [("_line", "ascending")])
        held = _stored(self.held, WINDOW_ROW_SCHEMA)
        settings = self.settings
        run = window_step(settings.window, settings.allowed_lateness, firsts, held, _advances_of(parts["advances"][0]))
        self.held.update((encode(run.held),))
        yield blob_frame(
            [
                *_passed(parts, bucket),
                (bucket, "window_changes", run.changes),
                (bucket, "late_events", run.late),
                (bucket, "outcomes", run.outcomes),
                (bucket, "state_windows", run.held),
            ]
        )


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
    return step(step(step(blobs, _Clock(settings, count)), _Dedup(settings, count)), _Windows(settings))


@dataclass(frozen=True)
class KeyedBatch:
    """One micro-batch as ``keyed_speed`` emitted it: ``batch`` (a ``StreamBatch``, what
    ``stream_step`` returns), ``lines`` (each line's ``segment`` and ``ingest_time``) and
    ``ran_in``, the micro-batch the clock ran in."""

    batch: StreamBatch
    lines: pa.Table
    ran_in: int

    def of(self, batch_id: int) -> StreamBatch:
        """``batch``, once it is micro-batch ``batch_id``'s (``RuntimeError`` when the clock ran
        in another)."""
        if self.ran_in != batch_id:
            raise RuntimeError(f"micro-batch {batch_id}: its rows are micro-batch {self.ran_in}'s")
        return self.batch


def _all(parts: dict[str, list[pa.Table]], kind: str, schema: pa.Schema, keys: list[tuple[str, str]]) -> pa.Table:
    tables = [table.cast(schema) for table in parts.get(kind, [])]
    return _in_order(tables, keys) if tables else schema.empty_table()


def keyed_batch(rows: pa.Table) -> KeyedBatch:
    """A micro-batch's rows from ``keyed_speed`` (collected) as a ``KeyedBatch``."""
    parts: dict[str, list[pa.Table]] = {}
    for kind, blob in zip(rows["kind"].to_pylist(), rows["blob"].to_pylist()):
        parts.setdefault(kind, []).append(decode(blob))
    if "batch" not in parts:
        raise RuntimeError("a micro-batch without the clock's figures: the clock did not run in it")
    figures = parts["batch"][0].to_pylist()[0]
    window_order = [(name, "ascending") for name in ("window_start", "window_end", *_WINDOW_KEY)]
    clock = parts["state_clock"][0].to_pylist()[0]
    lines = _in_order(parts["lines_seen"], [("segment", "ascending")]).cast(
        pa.schema([pa.field("segment", pa.int64()), pa.field("ingest_time", UTC_MICROS)])
    )
    batch = StreamBatch(
        input_lines=figures["input_lines"],
        heartbeats=figures["heartbeats"],
        watermark=figures["watermark"],
        next_watermark=figures["next_watermark"],
        dead_letters=_all(parts, "dead_letters", DEAD_LETTER_SCHEMA, _LINE_ORDER),
        duplicates=_all(parts, "duplicates", DUPLICATE_SCHEMA, _LINE_ORDER),
        late_events=_all(parts, "late_events", LATE_SCHEMA, [*_LINE_ORDER, ("window_start", "ascending")]),
        outcomes=_all(parts, "outcomes", OUTCOME_SCHEMA, [(name, "ascending") for name in OUTCOME_SCHEMA.names]),
        window_changes=_all(parts, "window_changes", WINDOW_CHANGE_SCHEMA, window_order),
        history=None,
        state=StreamState(
            ClockState(**clock),
            _all(parts, "state_remembered", REMEMBERED_SCHEMA, _LINE_ORDER),
            _all(parts, "state_windows", WINDOW_ROW_SCHEMA, window_order),
        ),
    )
    return KeyedBatch(batch, lines, figures["batch_id"])

"""The Kappa replay of every keyed pipeline: the stream's own rule over the whole log, on the executors.

``replay_on_executors`` re-runs a pipeline's ``StreamRule`` (``lklab.live_stream``) over the
whole log into tables of its own under ``kappa/RUN/`` (``replay_prefix``). What it writes is
what a live stream reading ``segments_per_batch`` segments per micro-batch (default 1, the live
stream's default) writes over the same log, batch ids included; nothing of the log passes
through the driver:

1. **Parse, in parallel.** The log is read by Spark (``shared.log_source.raw_log``, the rows the
   live stream's source gives) and, when the rule has one, parsed by its Spark transform
   (``rule.parse``), as many tasks as the log has partitions.
2. **Walk, in one task.** The lines are shuffled into one partition and sorted by ``segment``,
   ``line_number`` (Spark's sort spills to disk), and one ``mapInArrow`` task walks them in log
   order, a micro-batch (``segments_per_batch`` segments) at a time: ``rule.read``, then
   ``rule.step`` against the state carried from the micro-batch before (``rule.state.empty()``
   first), as ``LiveStream.process`` does. Each micro-batch's rows of each output table leave
   the task as Arrow IPC payloads (``WALK_SCHEMA``: table, batch id, part, payload), written to
   the executors' disks (``persist``); the tables written as a snapshot (``overwrite``: the
   state) leave once, after the last micro-batch. The task holds the state and one
   micro-batch's lines, never the log.
3. **Write, on the executors.** Each table's payloads are decoded back into rows by another
   ``mapInArrow`` and written with the lake's table API (``shared.tables.Tables.overwrite``: the
   executors write the files, the driver commits them), as the sink would have left them
   (``lklab.stream_sink``): ``append`` tables every row; ``merge`` tables the last row of each
   key across the micro-batches, none for a key whose last row deletes it (``_delete``), the
   ``_delete`` column dropped; ``overwrite`` tables the last micro-batch's rows. The state is
   written last: it is the commit point, so an interrupted replay has no state and is started
   over by the next one. Every commit is tagged ``(REPLAY_APP, last batch id)`` (a reconciliation
   reads the tables as of that batch) and the tables record the settings their rows depend on
   (``rule.table_settings``), as the sink's do.

The driver only plans, collects one schema per table and two totals (micro-batches, lines),
commits, and logs one JSON line for the replay (the rule's logger; the live stream logs one per
micro-batch). The stream's metrics table gets one row per micro-batch, as a live run's (its
timings, where it has any, are the walk task's). It is exact because every rule this runs is cut-independent (what it decides depends
on the log, not on how it is cut into micro-batches: the tests compare a replay with live runs
cut otherwise) and is walked in log order. The walk is one task: it does not parallelise, and
it is as fast as one core stepping the rule (per-key parallelism, which each keyed rule would
allow, is a later step).

A rule whose outcome over a whole log can be computed in parallel declares that computation
(``StreamRule.whole_log``: billing's windowed sums, by day and by key,
``lklab.pipelines.billing_windows.replay``): the replay runs it over the parsed lines instead of
steps 2 and 3 and writes the ``WholeLog`` rows it returns as above (the state last, every commit
tagged, the settings recorded), tables of its own (a history) before the state.

One replay of a name at a time per stream (the writer lock ``<app_id>-replay-<RUN>``,
``replay_lock``); a name whose replay finished (its state exists, or what ``completed`` says) is
refused (``ReplayExists``) unless ``replace``; a replay that did not finish is started over.
Either way the rule's tables under the prefix (and a checkpoint an older replay left) are
deleted first; an empty log is refused.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import shutil
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from functools import reduce
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema, to_arrow_schema
from pyspark.sql.types import BinaryType, IntegerType, LongType, StructField, StructType

from lklab.live_stream import StepOutput, StreamRule
from lklab.progress import progress as track
from lklab.stream_sink import MERGE, OVERWRITE, SinkTable
from shared import catalog
from shared.catalog import replay_prefix
from shared.compute_cost import measure_cost
from shared.config import LabConfig
from shared.eventlog import EventLog, written_log
from shared.locks import writer
from shared.log_source import raw_log
from shared.table_settings import record as record_settings
from shared.tables import Tables

__all__ = [
    "REPLAY_APP",
    "WALK_SCHEMA",
    "ReplayExists",
    "ReplayRun",
    "WholeLog",
    "replay_lock",
    "replay_on_executors",
    "segments_per_batch_of",
    "walk",
]

REPLAY_APP = "replay"  # the app id of a replay's commits (each tagged with its last batch id)

# What the walk task hands on: ``table`` the index of a table in the rule's layout (-1: a
# micro-batch's summary, ``lines`` its line count), ``batch_id`` the micro-batch (-1: the table's
# schema, an IPC stream without rows), ``part`` the payload's place among the batch's, ``payload``
# the rows as an Arrow IPC stream.
WALK_SCHEMA = StructType(
    [
        StructField("table", IntegerType(), False),
        StructField("batch_id", LongType(), False),
        StructField("part", IntegerType(), False),
        StructField("lines", LongType(), False),
        StructField("payload", BinaryType(), True),
    ]
)
_WALK_ARROW = pa.schema(
    [
        pa.field("table", pa.int32(), False),
        pa.field("batch_id", pa.int64(), False),
        pa.field("part", pa.int32(), False),
        pa.field("lines", pa.int64(), False),
        pa.field("payload", pa.binary()),
    ]
)
PART_ROWS = 4096  # rows per payload: a payload is one binary value, far below Spark's 2 GB
_SUMMARY, _SCHEMA = -1, -1
# the merge tables' decoded rows carry their place in the stream, to keep the last row of a key
_BATCH, _ROW = "_replay_batch", "_replay_row"


class ReplayExists(FileExistsError):
    """A replay of that name already has its tables."""


@dataclass(frozen=True)
class WholeLog:
    """What a rule's ``whole_log`` computed over the whole log: ``rows``, every table of its
    layout as the sink would have left it after the last micro-batch (and any other table it
    writes, such as a history: written before the state); ``micro_batches`` and ``lines``, how
    many a live run reading one segment per micro-batch steps and reads; ``release`` frees what
    it cached, once the tables are written."""

    rows: Mapping[catalog.Table, DataFrame | pa.Table]
    micro_batches: int
    lines: int
    release: Callable[[], None] = lambda: None


@dataclass(frozen=True)
class ReplayRun:
    """``segments``: how many the replay read; ``lines``: the lines it read;
    ``micro_batches``: how many micro-batches it walked (``segments_per_batch`` segments each)."""

    name: str
    prefix: str
    segments: int
    lines: int
    micro_batches: int
    wall_seconds: float
    cpu_seconds: float
    cost_scope: str

    def cost(self) -> str:
        """What it read and cost, as a replay's outcome says it."""
        return (
            f"{self.segments:,} segments in {self.wall_seconds:.1f} s wall, {self.cpu_seconds:.1f} CPU seconds "
            f"({self.cost_scope})"
        )


def _ipc(rows: pa.Table | pa.RecordBatch) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, rows.schema) as stream:
        stream.write(rows)
    return sink.getvalue().to_pybytes()


def _conform(rows: pa.Table, entry: SinkTable, schema: pa.Schema | None) -> pa.Table:
    """``rows`` with a ``_delete`` column when merged (false when absent, as the sink adds it) and
    the columns of the table's first micro-batch (``schema``), in its order."""
    if entry.write == MERGE and "_delete" not in rows.column_names:
        rows = rows.append_column("_delete", pa.array([False] * rows.num_rows, pa.bool_()))
    if schema is None or rows.schema.equals(schema):
        return rows
    if sorted(rows.column_names) != sorted(schema.names):
        raise ValueError(
            f"{entry.table.name}: a micro-batch has columns {rows.column_names}, an earlier one {schema.names}"
        )
    return rows.select(schema.names).cast(schema)


def walk(
    rule: StreamRule, config: LabConfig, segments_per_batch: int, last_batch: int, line_schema: pa.Schema
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The walk task's body (``mapInArrow``): the log's lines, sorted by segment and line
    number, stepped micro-batch after micro-batch (batch ``b``: segments
    ``b*segments_per_batch + 1`` on) up to ``last_batch``, as ``WALK_SCHEMA`` rows (the module
    docstring). A micro-batch without lines is stepped too, as the live stream steps one
    (``line_schema``: its lines' columns when no line came at all)."""
    layout = rule.layout

    def run(lines: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        settings = rule.settings(config)
        state = rule.state.empty()
        schemas: dict[int, pa.Schema] = {}
        snapshots: dict[int, pa.Table] = {}  # the overwrite tables' rows of the last micro-batch
        seen_schema: pa.Schema | None = None  # the lines' as Spark hands them
        held: list[pa.RecordBatch] = []
        batch_id = 0

        def step(batch_id: int, held: list[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
            nonlocal state
            started = time.monotonic()
            schema = line_schema if seen_schema is None else seen_schema
            lines = pa.Table.from_batches(held, schema) if held else schema.empty_table()
            output: StepOutput = rule.step(rule.read(lines, config), state, settings, batch_id, started)
            state = output.state
            rows = [(_SUMMARY, batch_id, 0, lines.num_rows, None)]
            for index, entry in enumerate(layout):
                table = output.rows.get(entry.table)
                if table is None:
                    raise ValueError(f"micro-batch {batch_id} has no rows for {entry.table.name}")
                table = _conform(table, entry, schemas.get(index))
                if index not in schemas:
                    schemas[index] = table.schema
                    rows.append((index, _SCHEMA, 0, 0, _ipc(table.schema.empty_table())))
                if entry.write == OVERWRITE:
                    snapshots[index] = table
                else:
                    rows.extend(_payloads(index, batch_id, table))
            yield _walk_batch(rows)

        for record in lines:
            if not record.num_rows:
                continue
            if seen_schema is None:
                seen_schema = record.schema
            groups = (record.column("segment").to_numpy() - 1) // segments_per_batch
            cuts = [0, *(np.flatnonzero(np.diff(groups)) + 1).tolist(), record.num_rows]
            for start, end in zip(cuts, cuts[1:]):
                group = int(groups[start])
                while batch_id < group:
                    yield from step(batch_id, held)
                    held, batch_id = [], batch_id + 1
                held.append(record.slice(start, end - start))
        while batch_id <= last_batch:
            yield from step(batch_id, held)
            held, batch_id = [], batch_id + 1
        final = []
        for index, table in snapshots.items():
            final.extend(_payloads(index, last_batch, table))
        yield _walk_batch(final)

    return run


def _payloads(index: int, batch_id: int, table: pa.Table) -> list[tuple]:
    return [
        (index, batch_id, part, 0, _ipc(chunk))
        for part, chunk in enumerate(table.to_batches(max_chunksize=PART_ROWS))
        if chunk.num_rows
    ]


def _walk_batch(rows: list[tuple]) -> pa.RecordBatch:
    columns = list(zip(*rows)) if rows else [[] for _ in _WALK_ARROW]
    return pa.RecordBatch.from_arrays(
        [pa.array(list(values), field.type) for values, field in zip(columns, _WALK_ARROW)], schema=_WALK_ARROW
    )


def _decoder(schema: pa.Schema, placed: bool) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """Payload rows back into the table's rows (``placed``: with their batch id and row number)."""
    out = schema.append(pa.field(_BATCH, pa.int64())).append(pa.field(_ROW, pa.int64())) if placed else schema

    def decode(payloads: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for record in payloads:
            for batch_id, part, payload in zip(
                record.column("batch_id").to_pylist(),
                record.column("part").to_pylist(),
                record.column("payload").to_pylist(),
            ):
                for rows in pa.ipc.open_stream(payload):
                    rows = pa.Table.from_batches([rows]).select(schema.names).cast(schema)
                    if placed:
                        first = part * PART_ROWS
                        rows = rows.append_column(_BATCH, pa.array([batch_id] * rows.num_rows, pa.int64()))
                        rows = rows.append_column(_ROW, pa.array(range(first, first + rows.num_rows), pa.int64()))
                    yield from rows.cast(out).to_batches()

    return decode


def _rows(walked: DataFrame, index: int, entry: SinkTable, schema: pa.Schema) -> DataFrame:
    """Table ``index``'s rows as the sink would have left them after the last micro-batch."""
    placed = entry.write == MERGE
    payloads = walked.where((F.col("table") == index) & (F.col("batch_id") >= 0)).select("batch_id", "part", "payload")
    spark_schema = from_arrow_schema(schema)
    if placed:
        spark_schema = spark_schema.add(_BATCH, LongType(), False).add(_ROW, LongType(), False)
    rows = payloads.mapInArrow(_decoder(schema, placed), spark_schema)
    if entry.write != MERGE:
        return rows
    # the last row of each key wins; a key with a null never matches (Delta's merge), so each such row is inserted
    latest = Window.partitionBy(*entry.keys).orderBy(F.col(_BATCH).desc(), F.col(_ROW).desc())
    unmatched = reduce(lambda a, b: a | b, (F.col(key).isNull() for key in entry.keys))
    return (
        rows.withColumn("_replay_rank", F.row_number().over(latest))
        .where((F.col("_replay_rank") == 1) | unmatched)
        .where(~F.coalesce(F.col("_delete"), F.lit(False)))
        .drop("_replay_rank", _BATCH, _ROW, "_delete")
    )


def segments_per_batch_of(lake: str | Path, batch_bytes: int) -> int:
    """How many segments make a micro-batch of about ``batch_bytes`` of log, from the mean size
    of the log's segments (at least 1): a cut for a rule whose step costs much per micro-batch,
    which the walk task then holds about ``batch_bytes`` of lines at a time for."""
    log = EventLog(lake)
    segments = log.last_segment()
    total = sum(log.segment_path(number).stat().st_size for number in range(1, segments + 1))
    return max(1, min(segments, batch_bytes * segments // max(total, 1)))


def _lines(spark: SparkSession, config: LabConfig, rule: StreamRule, lake: Path, segments: int) -> DataFrame:
    """The log's lines as the live stream's query gives them to ``foreachBatch``."""
    lines = raw_log(spark, str(lake), segments, max_line_bytes=config.max_line_bytes)
    if rule.parse is not None:
        lines = lines.transform(rule.parse, max_clock_skew=config.max_clock_skew)
    return lines


def replay_lock(rule: StreamRule, name: str) -> str:
    """The writer lock a replay named ``name`` of ``rule``'s stream holds while it runs."""
    return f"{rule.app_id}-replay-{name}"


def replay_on_executors(
    spark: SparkSession,
    config: LabConfig,
    rule: StreamRule,
    name: str,
    *,
    replace: bool = False,
    segments_per_batch: int = 1,
    completed: Callable[[Tables, str], bool] | None = None,
    **options: Any,
) -> ReplayRun:
    """Replay the whole log through ``rule`` into ``kappa/<name>/`` (the module docstring);
    ``options`` go to the rule's ``whole_log`` (a walked rule takes none). ``completed(tables,
    name)`` says, under the lock, whether a replay of that name finished (default: its state
    was written); one that did not is started over without asking."""
    if segments_per_batch < 1:
        raise ValueError(f"segments_per_batch must be at least 1, got {segments_per_batch}")
    if rule.layout[-1].write != OVERWRITE:
        raise ValueError("a stream's last table is its state, written with write='overwrite'")
    if options and rule.whole_log is None:
        raise TypeError(f"the {rule.what}'s replay takes no options, got {sorted(options)}")
    lake = Path(config.lake).resolve()
    prefix = replay_prefix(name)
    with writer(lake, replay_lock(rule, name)):
        tables = Tables(spark, lake, config.table_engine)
        state = rule.layout[-1].table.at(prefix)
        finished = tables.exists(state) if completed is None else completed(tables, name)
        if finished and not replace:
            raise ReplayExists(f"replay {name!r} already has {state}; pick another --name or pass --replace")
        # without its state (the commit point) a replay never finished: it starts over
        for entry in rule.layout:
            shutil.rmtree(tables.path(entry.table.at(prefix)), ignore_errors=True)
        shutil.rmtree(lake / "checkpoints" / (prefix + REPLAY_APP), ignore_errors=True)  # an older replay's
        _, segments = written_log(lake, "nothing to replay (run 'lklab generate' first)")
        last_batch = (segments - 1) // segments_per_batch
        with measure_cost(config.spark_master) as cost:
            lines = _lines(spark, config, rule, lake, segments)
            if rule.whole_log is not None:
                computed: WholeLog = rule.whole_log(lines, config, **options)
                try:
                    _write_whole(tables, prefix, rule, computed, last_batch, rule.table_settings(config))
                finally:
                    computed.release()
                totals = {"lines": computed.lines, "batches": computed.micro_batches}
            else:
                totals = _walk_and_write(tables, prefix, rule, lines, segments_per_batch, last_batch, config)
        run = ReplayRun(
            name,
            prefix,
            segments,
            int(totals["lines"] or 0),
            int(totals["batches"]),
            cost.wall_seconds,
            cost.cpu_seconds,
            cost.scope,
        )
        logging.getLogger(rule.logger).info(json.dumps({"event": "replay", **dataclasses.asdict(run)}))
        return run


def _walk_and_write(
    tables: Tables,
    prefix: str,
    rule: StreamRule,
    lines: DataFrame,
    segments_per_batch: int,
    last_batch: int,
    config: LabConfig,
) -> dict[str, int]:
    """Walk ``lines`` in one task and write every table of the layout from the walk's payloads
    (steps 2 and 3 of the module docstring); the totals of the walk."""
    line_schema = to_arrow_schema(lines.schema, timezone="UTC")
    walked = (
        lines.repartition(1)
        .sortWithinPartitions("segment", "line_number")
        .mapInArrow(walk(rule, config, segments_per_batch, last_batch, line_schema), WALK_SCHEMA)
        .persist(StorageLevel.DISK_ONLY)
    )
    try:
        totals = (
            walked.where(F.col("table") == _SUMMARY)
            .agg(F.count("*").alias("batches"), F.sum("lines").alias("lines"))
            .first()
        )
        schemas = {
            row["table"]: pa.ipc.open_stream(row["payload"]).schema
            for row in walked.where((F.col("batch_id") == _SCHEMA) & (F.col("table") >= 0))
            .select("table", "payload")
            .collect()
        }
        rows = {entry.table: _rows(walked, index, entry, schemas[index]) for index, entry in enumerate(rule.layout)}
        _write(tables, prefix, rule, rows, last_batch, rule.table_settings(config))
    finally:
        walked.unpersist()
    return {"lines": totals["lines"], "batches": totals["batches"]}


def _write_whole(
    tables: Tables, prefix: str, rule: StreamRule, computed: WholeLog, last_batch: int, settings: dict[str, Any]
) -> None:
    layout = [entry.table for entry in rule.layout]
    missing = [table.name for table in layout if table not in computed.rows]
    if missing:
        raise ValueError(f"the {rule.what}'s whole-log replay has no rows for {', '.join(missing)}")
    _write(tables, prefix, rule, computed.rows, last_batch, settings)


def _write(
    tables: Tables,
    prefix: str,
    rule: StreamRule,
    rows: Mapping[catalog.Table, DataFrame | pa.Table],
    last_batch: int,
    settings: dict[str, Any],
) -> None:
    """Every table of ``rows`` (the layout's in its order, then any other), each recording
    ``settings``: the state (the commit point) last. One after the other: a write sets session
    settings around its Spark job (``shared.session_conf``), which writes side by side would
    race on."""
    layout = [entry.table for entry in rule.layout]
    order = [*layout[:-1], *(table for table in rows if table not in layout), layout[-1]]
    with track(f"{rule.what} replay: tables written", total=len(order)) as writing:
        for table in order:
            name = table.at(prefix)
            tables.overwrite(name, rows[table], app_id=REPLAY_APP, version=last_batch)
            record_settings(tables, [name], settings)
            writing.advance()

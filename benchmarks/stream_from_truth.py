"""A lake whose speed-layer tables are derived from the log, for reconciliation benchmarks.

Running the real speed layer over a log big enough for a million windows takes hours on a small
machine, so ``build_lake`` writes what a speed layer *would* have recorded had it read the same
log and behaved in three known ways, and records how many lines each behaviour touched:

* ``late``: a deterministic sample of the events (``late_share``, by a hash of ``event_id``)
  went to ``late_events`` (their window, a watermark past the window's end, the lateness)
  instead of ``speed_aggregates``;
* ``counted retries``: a sample of the later copies (``counted_retry_share``, by a hash of
  ``event_id`` and ``ingest_time``: the same lines wherever a log's segments are numbered) was
  counted as new events (a stream that had forgotten the first copy: beyond its dedup horizon); every
  other later copy is in ``duplicate_events``;
* ``unread``: the batch ran ``unread_segments`` segments before the log's end
  (``run_batch(last_segment=...)``); the stream read to the end.

Everything else is what the shared chain says about each line: ``dead_letter`` holds the lines
validation rejects, ``speed_aggregates`` the window totals (``shared.batch_chain.window_totals``)
of the events the stream counted, all ``final``. ``stream_metrics`` has one summary row whose
``last_segment`` is the log's end. So reconciliation has real work (late, duplicate and unread
lines to attribute, windows missing and extra) and a known answer: nothing unexplained.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from lklab.pipelines.billing_windows.batch import run_batch
from lklab.pipelines.billing_windows.generator import GeneratorParams, generate
from lklab.scenarios import HOUR
from shared.batch_chain import classify_lines, window_totals
from shared.catalog import DEAD_LETTER, DUPLICATE_EVENTS, LATE_EVENTS, SPEED_AGGREGATES, STREAM_METRICS, STREAM_STATE
from shared.config import LabConfig
from shared.eventlog import EventLog
from shared.events import EVENT_COLUMNS, parse_events
from shared.log_source import log_reader
from shared.tables import Tables
from shared.windows import assign_windows

__all__ = ["LakeShape", "DerivedLake", "build_lake", "stream_tables", "write_stream_tables"]


@dataclass(frozen=True)
class LakeShape:
    """The generated log (``billing``) and the stream's known behaviours."""

    events: int
    accounts: int
    span_hours: int = 24
    late_share: float = 0.01
    counted_retry_share: float = 0.2
    unread_segments: int = 60
    seed: int = 7


@dataclass(frozen=True)
class DerivedLake:
    """What was built: sizes, and the line counts each behaviour should be attributed."""

    lines: int
    segments: int
    batch_last_segment: int
    truth_windows: int
    stream_windows: int
    late_events: int
    late_events_read_by_batch: int
    counted_retries_read_by_batch: int
    stream_lines_beyond_batch: int


def _sampled(share: float, *columns: str) -> Column:
    """A deterministic ``share`` of the rows, by a hash of ``columns``."""
    return F.pmod(F.xxhash64(*columns), F.lit(1_000_000)) < F.lit(int(round(share * 1_000_000)))


def _with_batch(frame: DataFrame) -> DataFrame:
    """One segment per micro-batch, batch ids from 0."""
    return frame.withColumn("batch_id", (F.col("segment") - 1).cast("long"))


def stream_tables(
    spark: SparkSession, lake: Path, config: LabConfig, shape: LakeShape, last: int
) -> dict[str, DataFrame]:
    """The stream's tables of segments 1..``last`` of ``lake`` (the module docstring), by name, and
    ``_parsed`` (every line), ``_aggregated`` (the events counted), ``_counted`` (the counted
    retries) for the figures a caller wants of them."""
    raw = (
        log_reader(spark)
        .option("path", str(lake))
        .option("end", last)
        .option("maxLineBytes", config.max_line_bytes)
        .load()
    )
    parsed = raw.transform(parse_events, max_clock_skew=config.max_clock_skew).persist()
    lines = classify_lines(parsed)
    late = _sampled(shape.late_share, "event_id")
    counted = _sampled(shape.counted_retry_share, "event_id", "ingest_time")
    aggregated = (
        lines.events.where(~late)
        .select(*EVENT_COLUMNS)
        .unionByName(lines.duplicates.where(counted).select(*EVENT_COLUMNS))
    )
    # Late by a hash-chosen 0-3599 s past the window's end: the watermark had closed it.
    watermark = F.timestamp_micros(
        F.unix_micros("window_end") + F.pmod(F.xxhash64("event_id"), F.lit(3600)) * 1_000_000
    )
    late_events = (
        lines.events.where(late)
        .transform(assign_windows(config.window))
        .withColumn("watermark", watermark)
        .withColumn(
            "lateness_seconds",
            ((F.unix_micros("watermark") - F.unix_micros("event_time")).cast("decimal(20,0)") / 1_000_000).cast(
                "decimal(20,6)"
            ),
        )
        .transform(_with_batch)
    )
    speed_aggregates = aggregated.transform(window_totals(config.window)).select(
        "*",
        F.lit("final").alias("status"),
        F.lit(last - 1).cast("long").alias("updated_batch_id"),
        F.lit(None).cast("timestamp").alias("updated_ingest_time"),
    )
    return {
        SPEED_AGGREGATES.name: speed_aggregates,
        LATE_EVENTS.name: late_events,
        DUPLICATE_EVENTS.name: lines.duplicates.where(~counted).transform(_with_batch),
        DEAD_LETTER.name: lines.dead_letters.transform(_with_batch),
        "_parsed": parsed,
        "_aggregated": aggregated,
        "_counted": lines.duplicates.where(counted),
    }


def write_stream_tables(tables: Tables, stream: dict[str, DataFrame], last: int, input_lines: int) -> dict[str, int]:
    """Write ``stream`` (``stream_tables``) as the speed layer's tables of a log of ``last``
    segments and ``input_lines`` lines, with one ``stream_metrics`` summary row; the rows written
    per table."""
    written = {}
    for name in (t.name for t in (SPEED_AGGREGATES, LATE_EVENTS, DUPLICATE_EVENTS, DEAD_LETTER)):
        rows = stream[name].toArrow()
        tables.overwrite(name, rows)
        written[name] = rows.num_rows
    summary = {
        "batch_id": pa.array([last - 1], pa.int64()),
        "first_segment": pa.array([1], pa.int64()),
        "last_segment": pa.array([last], pa.int64()),
        "input_lines": pa.array([input_lines], pa.int64()),
        "late": pa.array([written[LATE_EVENTS.name]], pa.int64()),
        "duplicates": pa.array([written[DUPLICATE_EVENTS.name]], pa.int64()),
        "dead_letters": pa.array([written[DEAD_LETTER.name]], pa.int64()),
    }
    tables.overwrite(STREAM_METRICS.name, pa.table(summary))
    # Reconcile reads a stream at the cut its state names (shared.stream_cut); a state without
    # tagged commits means tables written in one go, read as they stand, as a replay's are.
    tables.overwrite(STREAM_STATE.name, STREAM_STATE.schema.empty_table())
    return written


def build_lake(spark: SparkSession, lake: Path, shape: LakeShape, progress=lambda message: None) -> DerivedLake:
    """Generate the log, run the batch short of the end, derive the stream's tables (and an
    empty ``stream_state``: written in one go, ready to reconcile)."""
    params = GeneratorParams(
        events=shape.events, accounts=shape.accounts, span=shape.span_hours * HOUR, seed=shape.seed
    )
    manifest = generate(params, lake, progress=progress).manifest
    config = LabConfig(lake=lake, table_engine="deltalake")
    tables = Tables(spark, lake, config.table_engine)
    last = EventLog(lake).last_segment()
    batch_last = max(1, last - shape.unread_segments)
    progress(f"batch recompute over segments 1..{batch_last} of {last}")
    batch = run_batch(spark, config, last_segment=batch_last)

    progress("deriving the speed layer's tables")
    stream = stream_tables(spark, lake, config, shape, last)
    written = write_stream_tables(tables, stream, last, manifest["lines"])
    beyond = F.col("segment") > F.lit(batch_last)
    derived = DerivedLake(
        lines=manifest["lines"],
        segments=last,
        batch_last_segment=batch_last,
        truth_windows=batch.windows,
        stream_windows=written[SPEED_AGGREGATES.name],
        late_events=written[LATE_EVENTS.name],
        late_events_read_by_batch=stream[LATE_EVENTS.name].where(~beyond).count(),
        counted_retries_read_by_batch=stream["_counted"].where(~beyond).count(),
        stream_lines_beyond_batch=stream["_aggregated"].where(beyond).count(),
    )
    spark.catalog.clearCache()
    return derived

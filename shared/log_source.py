"""A Spark data source over the event log: batch and streaming read the log the same way.

``spark.read.format("lklab_log").option("path", lake)`` reads segments (options ``start`` and
``end``, inclusive, default all) as rows of ``RAW_LINE_SCHEMA``: ``segment``, ``line_number``
(1-based) and ``raw_line``.

``raw_log`` reads the same rows with Spark's own text reader (each segment whole, split into
numbered lines in SQL; no Python process), and ``parsed_log`` parses them: the way the batch
paths (recompute, replay, reconciliation) read the log.

``spark.readStream.format("lklab_log")`` reads the same rows as a stream. Its offset is the
number of the last segment read, so Spark's checkpoint records exactly how far the log was
consumed, and a restarted query goes on from the next segment. Admission control keeps the
sequence: each micro-batch takes the next ``segmentsPerBatch`` segments (default 1), never a
later segment before an earlier one.
"""

from __future__ import annotations

from typing import Iterator

import pyarrow as pa
from pyspark.sql import SparkSession
from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxFiles,
    SupportsTriggerAvailableNow,
)

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, StringType

from shared.config import LabConfig
from shared.eventlog import EventLog
from shared.events import RAW_LINE_SCHEMA, parse_events

__all__ = ["LogDataSource", "register_log_source", "raw_log", "parsed_log", "SOURCE_NAME"]

SOURCE_NAME = "lklab_log"
_ARROW_SCHEMA = pa.schema(
    [
        pa.field("segment", pa.int64()),
        pa.field("line_number", pa.int64()),
        pa.field("raw_line", pa.string()),
    ]
)
_MIN_PARTITION_BYTES = 1 << 20
_MAX_PARTITION_BYTES = 64 << 20
_PARTITIONS_WANTED = 8


class SegmentRange(InputPartition):
    """Segments ``first`` to ``last`` (inclusive) read by one task."""

    def __init__(self, lake: str, first: int, last: int) -> None:
        super().__init__((first, last))
        self.lake = lake
        self.first = first
        self.last = last


def _read_range(partition: SegmentRange) -> Iterator[pa.RecordBatch]:
    log = EventLog(partition.lake)
    for number in range(partition.first, partition.last + 1):
        lines = EventLog.read_lines(log.segment_path(number))
        if not lines:
            continue
        yield pa.RecordBatch.from_arrays(
            [
                pa.array([number] * len(lines), pa.int64()),
                pa.array(range(1, len(lines) + 1), pa.int64()),
                pa.array(lines, pa.string()),
            ],
            schema=_ARROW_SCHEMA,
        )


def _plan(log: EventLog, first: int, last: int) -> list[SegmentRange]:
    """Split ``first..last`` into contiguous ranges: about ``_PARTITIONS_WANTED`` of them,
    each between ``_MIN_PARTITION_BYTES`` and ``_MAX_PARTITION_BYTES`` where segments allow."""
    sizes = {number: log.segment_path(number).stat().st_size for number in range(first, last + 1)}
    target = min(_MAX_PARTITION_BYTES, max(_MIN_PARTITION_BYTES, sum(sizes.values()) // _PARTITIONS_WANTED))
    ranges: list[SegmentRange] = []
    start, size = first, 0
    for number, segment_size in sizes.items():
        size += segment_size
        if size >= target or number == last:
            ranges.append(SegmentRange(str(log.lake), start, number))
            start, size = number + 1, 0
    return ranges


class _BatchReader(DataSourceReader):
    def __init__(self, log: EventLog, first: int, last: int) -> None:
        self.log, self.first, self.last = log, first, last

    def partitions(self) -> list[SegmentRange]:
        return _plan(self.log, self.first, self.last) or [SegmentRange(str(self.log.lake), 1, 0)]

    def read(self, partition: SegmentRange) -> Iterator[pa.RecordBatch]:
        return _read_range(partition)


class _StreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, log: EventLog, segments_per_batch: int) -> None:
        self.log = log
        self.segments_per_batch = segments_per_batch
        self.available_now_target: int | None = None

    def prepareForTriggerAvailableNow(self) -> None:
        """``Trigger.AvailableNow``: stop at the segment that is newest now, still batch by batch."""
        self.available_now_target = self.log.last_segment()

    def initialOffset(self) -> dict:
        return {"segment": 0}

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadMaxFiles(self.segments_per_batch)

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        available = self.log.last_segment()
        if self.available_now_target is not None:
            available = min(available, self.available_now_target)
        if isinstance(limit, ReadAllAvailable):
            return {"segment": available}
        if isinstance(limit, ReadMaxFiles):
            return {"segment": min(available, start["segment"] + limit.max_files)}
        raise ValueError(f"{SOURCE_NAME}: unsupported read limit {limit!r}; use segmentsPerBatch")

    def reportLatestOffset(self) -> dict:
        return {"segment": self.log.last_segment()}

    def partitions(self, start: dict, end: dict) -> list[SegmentRange]:
        first, last = start["segment"] + 1, end["segment"]
        return _plan(self.log, first, last) if last >= first else []

    def read(self, partition: SegmentRange) -> Iterator[pa.RecordBatch]:
        return _read_range(partition)

    def commit(self, end: dict) -> None:
        """Segments are immutable and kept: nothing to release."""


class LogDataSource(DataSource):
    """The event log as a Spark source (see the module docstring for options)."""

    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def schema(self) -> str:
        return RAW_LINE_SCHEMA.simpleString()

    def _log(self) -> EventLog:
        if "path" not in self.options:
            raise ValueError(f"{SOURCE_NAME}: option 'path' (the lake directory) is required")
        return EventLog(self.options["path"])

    def reader(self, schema) -> DataSourceReader:
        log = self._log()
        last_available = log.last_segment()
        first = int(self.options.get("start", 1))
        last = int(self.options.get("end", last_available))
        if first < 1 or last > last_available:
            raise ValueError(
                f"{SOURCE_NAME}: segments {first}..{last} requested, log has 1..{last_available}"
            )
        return _BatchReader(log, first, last)

    def streamReader(self, schema) -> DataSourceStreamReader:
        per_batch = int(self.options.get("segmentsPerBatch", 1))
        if per_batch < 1:
            raise ValueError(f"{SOURCE_NAME}: segmentsPerBatch must be at least 1, got {per_batch}")
        return _StreamReader(self._log(), per_batch)


def register_log_source(spark: SparkSession) -> None:
    """Make ``format("lklab_log")`` available in this session."""
    spark.dataSource.register(LogDataSource)


def raw_log(spark: SparkSession, lake: str, last_segment: int, *, first_segment: int = 1) -> DataFrame:
    """Segments ``first_segment..last_segment`` as ``RAW_LINE_SCHEMA`` rows, exactly as
    ``format("lklab_log")`` gives them, read by Spark's text reader.

    Each segment is read whole and split on ``\\n`` in SQL (a final empty piece is no line), so
    every line keeps its segment and number however Spark splits the work. A segment that is not
    valid UTF-8 is split in Python instead, with the log's ``\\xNN`` escapes
    (``EventLog.read_lines``): rare, and only that segment's bytes go to Python.
    """
    log = EventLog(lake)
    available = log.last_segment()  # also refuses a log with a gap
    if last_segment > available:
        raise ValueError(f"{SOURCE_NAME}: segments 1..{last_segment} requested, log has 1..{available}")
    if last_segment < max(first_segment, 1):
        return spark.createDataFrame([], RAW_LINE_SCHEMA)
    segments = (
        spark.read.option("pathGlobFilter", "segment-*.jsonl")
        .text(str(log.root), wholetext=True)
        .select(
            F.regexp_extract("_metadata.file_name", _SEGMENT_NAME, 1).cast("long").alias("segment"),
            F.col("value").alias("text"),
        )
        .where(F.col("segment").between(first_segment, last_segment))
        .select("segment", "text", F.is_valid_utf8("text").alias("utf8"))
    )
    utf8, text = F.col("utf8"), F.col("text")
    split = segments.select(
        "segment",
        F.when(utf8, F.split(text, "\n", -1)).otherwise(_escaped_lines(F.when(~utf8, text.cast("binary")))).alias("pieces"),
    )
    pieces = F.col("pieces")
    lines = F.when(F.element_at(pieces, -1) == "", F.slice(pieces, 1, F.size(pieces) - 1)).otherwise(pieces)
    return split.select("segment", F.posexplode(lines).alias("position", "raw_line")).select(
        "segment", (F.col("position") + 1).cast("long").alias("line_number"), "raw_line"
    )


_SEGMENT_NAME = r"^segment-([0-9]{12})\.jsonl$"


def _split_escaped(data: bytes | None) -> list[str] | None:
    """A segment's bytes split as ``EventLog.read_lines`` splits them (a final empty piece kept,
    as ``split`` keeps it)."""
    return None if data is None else bytes(data).decode("utf-8", "backslashreplace").split("\n")


_escaped_lines = F.udf(_split_escaped, ArrayType(StringType()), useArrow=False)


def parsed_log(
    spark: SparkSession,
    lake: str,
    last_segment: int,
    *,
    first_segment: int = 1,
    max_clock_skew: int = LabConfig.max_clock_skew,
) -> DataFrame:
    """Segments ``1..last_segment`` (or from ``first_segment``) of the log, parsed and validated
    (``parse_events`` output): the one way the batch paths (recompute, replay, reconciliation)
    read the log. Pass the run's ``max-clock-skew`` setting: it decides which lines are dead
    letters."""
    return raw_log(spark, lake, last_segment, first_segment=first_segment).transform(parse_events, max_clock_skew=max_clock_skew)

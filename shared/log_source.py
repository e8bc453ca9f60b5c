"""A Spark data source over the event log: batch and streaming read the log the same way.

``log_reader(spark).option("path", lake)`` (``spark.read.format("lklab_log")``, the source
registered first) reads segments (options ``start`` and ``end``, inclusive, default all) as rows
of ``RAW_LINE_SCHEMA``: ``segment``, ``line_number`` (1-based), ``raw_line``, ``line_bytes`` and
``appended_at`` (the segment's stamp, from its header: ``shared.eventlog``). Lines are taken as ``shared.eventlog.scan_lines`` takes them, a chunk at a time: a byte order
mark opening a segment dropped, a line longer than option ``maxLineBytes`` (default: the
``max-line-bytes`` setting) kept as its first bytes, ``line_bytes`` its length, and bytes that
are not UTF-8 handed to Spark as they are (a Spark string holds bytes, as its own text reader
leaves them; ``parse_events`` dead-letters them).

``raw_log`` reads the same rows with Spark's own text reader (each segment whole, split into
numbered lines in SQL; no Python process) for segments up to ``WHOLE_SEGMENT_BYTES``, and with
the source above for larger ones, so no segment is ever held whole however large it or one of
its lines is. ``parsed_log`` parses them: the way the batch paths (recompute, replay,
reconciliation) read the log.

``log_stream_reader(spark)`` reads the same rows as a stream. Its offset is the
number of the last segment read, so Spark's checkpoint records exactly how far the log was
consumed, and a restarted query goes on from the next segment. Admission control keeps the
sequence: each micro-batch takes the next ``segmentsPerBatch`` segments (default 1), never a
later segment before an earlier one.
"""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
from pyspark.sql import Column, DataFrame, DataFrameReader, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming import DataStreamReader
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxFiles,
    SupportsTriggerAvailableNow,
)

from shared.config import LabConfig
from shared.eventlog import (
    BOM,
    HEADER_BYTES,
    HEADER_PATTERN,
    LINE_PREFIX_BYTES,
    SEGMENT_HEADER,
    EventLog,
    read_stamp,
    scan_lines,
)
from shared.events import RAW_LINE_SCHEMA, parse_events
from shared.line_rows import LINE_POSITION, RAW_LINE

__all__ = [
    "LogDataSource",
    "register_log_source",
    "log_reader",
    "log_stream_reader",
    "raw_log",
    "parsed_log",
    "segment_stamps",
    "SOURCE_NAME",
    "WHOLE_SEGMENT_BYTES",
]

SOURCE_NAME = "lklab_log"
WHOLE_SEGMENT_BYTES = 64 << 20  # larger segments are read a chunk at a time
_ARROW_SCHEMA = pa.schema(
    [*LINE_POSITION, RAW_LINE, pa.field("line_bytes", pa.int64()), pa.field("appended_at", pa.string())]
)
_MIN_PARTITION_BYTES = 1 << 20
_MAX_PARTITION_BYTES = 64 << 20
_PARTITIONS_WANTED = 8


class SegmentRange(InputPartition):
    """Segments ``first`` to ``last`` (inclusive) read by one task."""

    def __init__(self, lake: str, first: int, last: int, max_line_bytes: int = LabConfig.max_line_bytes) -> None:
        super().__init__((first, last))
        self.lake = lake
        self.first = first
        self.last = last
        self.max_line_bytes = max_line_bytes


def _read_range(partition: SegmentRange) -> Iterator[pa.RecordBatch]:
    log = EventLog(partition.lake)
    for number in range(partition.first, partition.last + 1):
        with open(log.segment_path(number), "rb") as handle:
            stamp = read_stamp(handle)
            line_number = 1
            for lines, lengths in scan_lines(handle, partition.max_line_bytes):
                yield pa.RecordBatch.from_arrays(
                    [
                        pa.array([number] * len(lines), pa.int64()),
                        pa.array(range(line_number, line_number + len(lines)), pa.int64()),
                        # a view, not a decode: the bytes reach Spark as they are
                        pa.array(lines, pa.binary()).view(pa.string()),
                        pa.array(lengths, pa.int64()),
                        pa.repeat(pa.scalar(stamp, pa.string()), len(lines)),
                    ],
                    schema=_ARROW_SCHEMA,
                )
                line_number += len(lines)


def _plan(log: EventLog, first: int, last: int, max_line_bytes: int = LabConfig.max_line_bytes) -> list[SegmentRange]:
    """Split ``first..last`` into contiguous ranges: about ``_PARTITIONS_WANTED`` of them,
    each between ``_MIN_PARTITION_BYTES`` and ``_MAX_PARTITION_BYTES`` where segments allow."""
    sizes = {number: log.segment_path(number).stat().st_size for number in range(first, last + 1)}
    target = min(_MAX_PARTITION_BYTES, max(_MIN_PARTITION_BYTES, sum(sizes.values()) // _PARTITIONS_WANTED))
    ranges: list[SegmentRange] = []
    start, size = first, 0
    for number, segment_size in sizes.items():
        size += segment_size
        if size >= target or number == last:
            ranges.append(SegmentRange(str(log.lake), start, number, max_line_bytes))
            start, size = number + 1, 0
    return ranges


class _BatchReader(DataSourceReader):
    def __init__(self, log: EventLog, first: int, last: int, max_line_bytes: int) -> None:
        self.log, self.first, self.last, self.max_line_bytes = log, first, last, max_line_bytes

    def partitions(self) -> list[SegmentRange]:
        return _plan(self.log, self.first, self.last, self.max_line_bytes) or [SegmentRange(str(self.log.lake), 1, 0)]

    def read(self, partition: SegmentRange) -> Iterator[pa.RecordBatch]:
        return _read_range(partition)


class _StreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, log: EventLog, segments_per_batch: int, max_line_bytes: int) -> None:
        self.log = log
        self.segments_per_batch = segments_per_batch
        self.max_line_bytes = max_line_bytes
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
        return _plan(self.log, first, last, self.max_line_bytes) if last >= first else []

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

    def _max_line_bytes(self) -> int:
        return int(self.options.get("maxLineBytes", LabConfig.max_line_bytes))

    def reader(self, schema) -> DataSourceReader:
        log = self._log()
        last_available = log.last_segment()
        first = int(self.options.get("start", 1))
        last = int(self.options.get("end", last_available))
        if first < 1 or last > last_available:
            raise ValueError(f"{SOURCE_NAME}: segments {first}..{last} requested, log has 1..{last_available}")
        return _BatchReader(log, first, last, self._max_line_bytes())

    def streamReader(self, schema) -> DataSourceStreamReader:
        per_batch = int(self.options.get("segmentsPerBatch", 1))
        if per_batch < 1:
            raise ValueError(f"{SOURCE_NAME}: segmentsPerBatch must be at least 1, got {per_batch}")
        return _StreamReader(self._log(), per_batch, self._max_line_bytes())


def register_log_source(spark: SparkSession) -> None:
    """Make ``format("lklab_log")`` available in this session (once it has been, doing it again
    costs a few milliseconds)."""
    spark.dataSource.register(LogDataSource)


def log_reader(spark: SparkSession) -> DataFrameReader:
    """``spark.read.format("lklab_log")``, the source registered first. Sessions register it
    when a reader needs it, not when they start: the first registration in a new JVM takes
    about a second, which a command that never reads through the source need not pay."""
    register_log_source(spark)
    return spark.read.format(SOURCE_NAME)


def log_stream_reader(spark: SparkSession) -> DataStreamReader:
    """``spark.readStream.format("lklab_log")``, the source registered first (``log_reader``)."""
    register_log_source(spark)
    return spark.readStream.format(SOURCE_NAME)


def raw_log(
    spark: SparkSession,
    lake: str,
    last_segment: int,
    *,
    first_segment: int = 1,
    max_line_bytes: int = LabConfig.max_line_bytes,
    whole_segment_bytes: int = WHOLE_SEGMENT_BYTES,
) -> DataFrame:
    """Segments ``first_segment..last_segment`` as ``RAW_LINE_SCHEMA`` rows, exactly as
    ``format("lklab_log")`` gives them.

    A segment of at most ``whole_segment_bytes`` is read whole by Spark's text reader, its
    header (if any) taken off as ``appended_at``, and split on ``\\n`` in SQL (a final empty
    piece is no line), so every line keeps its segment and
    number however Spark splits the work; a line longer than ``max_line_bytes`` is then cut to
    its first bytes as ``scan_lines`` cuts it. A segment that is not valid UTF-8 is split on
    its bytes instead, kept as they are (``_split_bytes``; rare, and slower than ``split``).
    A larger segment is read by the source itself, a chunk at a time.
    """
    log = EventLog(lake)
    available = log.last_segment()  # also refuses a log with a gap
    if last_segment > available:
        raise ValueError(f"{SOURCE_NAME}: segments 1..{last_segment} requested, log has 1..{available}")
    if last_segment < max(first_segment, 1):
        return spark.createDataFrame([], RAW_LINE_SCHEMA)
    first_segment = max(first_segment, 1)
    large = [
        n for n in range(first_segment, last_segment + 1) if log.segment_path(n).stat().st_size > whole_segment_bytes
    ]
    segments = (
        spark.read.option("pathGlobFilter", "segment-*.jsonl")
        .text(str(log.root), wholetext=True)
        # a condition on the file size alone: Spark skips those files without opening them
        .where(F.col("_metadata.file_size") <= F.lit(whole_segment_bytes))
        .select(
            F.regexp_extract("_metadata.file_name", _SEGMENT_NAME, 1).cast("long").alias("segment"),
            F.col("value").alias("text"),
        )
        .where(F.col("segment").between(first_segment, last_segment))
    )
    text = F.col("text")
    # the header's bytes are ASCII: as characters, they are as many
    header = F.substring(text, 1, HEADER_BYTES - 1).rlike(HEADER_PATTERN) & (F.substring(text, HEADER_BYTES, 1) == "\n")
    after = lambda prefix_bytes: F.substring(text.cast("binary"), prefix_bytes + 1, _MAX_INT).cast("string")  # noqa: E731
    segments = segments.select(
        "segment",
        F.when(header, after(HEADER_BYTES)).otherwise(text).alias("text"),
        F.when(header, F.substring(text, len(SEGMENT_HEADER) + 1, HEADER_BYTES - len(SEGMENT_HEADER) - 1)).alias(
            "appended_at"
        ),
    )
    segments = segments.select(
        "segment", F.when(text.startswith(BOM.decode()), after(len(BOM))).otherwise(text).alias("text"), "appended_at"
    ).select("segment", "text", "appended_at", F.is_valid_utf8("text").alias("utf8"))
    utf8 = F.col("utf8")
    split = segments.select(
        "segment",
        "appended_at",
        F.when(utf8, F.split(text, "\n", -1)).otherwise(_split_bytes(text.cast("binary"))).alias("pieces"),
    )
    pieces = F.col("pieces")
    lines = F.when(F.element_at(pieces, -1) == "", F.slice(pieces, 1, F.size(pieces) - 1)).otherwise(pieces)
    keep = min(LINE_PREFIX_BYTES, max_line_bytes)
    line, length = F.col("raw_line"), F.octet_length("raw_line")
    read = split.select("segment", "appended_at", F.posexplode(lines).alias("position", "raw_line")).select(
        "segment",
        (F.col("position") + 1).cast("long").alias("line_number"),
        F.when(length > max_line_bytes, F.substring(line.cast("binary"), 1, keep).cast("string"))
        .otherwise(line)
        .alias("raw_line"),
        length.cast("long").alias("line_bytes"),
        "appended_at",
    )
    for first, last in _runs(large):
        chunked = (
            log_reader(spark)
            .option("path", str(log.lake))
            .option("start", first)
            .option("end", last)
            .option("maxLineBytes", max_line_bytes)
            .load()
        )
        read = read.unionByName(chunked)
    return read


_SEGMENT_NAME = r"^segment-([0-9]{12})\.jsonl$"
_MAX_INT = (1 << 31) - 1


def _runs(numbers: list[int]) -> list[tuple[int, int]]:
    """Sorted numbers as ``(first, last)`` runs of consecutive ones."""
    runs: list[tuple[int, int]] = []
    for number in numbers:
        if runs and runs[-1][1] == number - 1:
            runs[-1] = (runs[-1][0], number)
        else:
            runs.append((number, number))
    return runs


def _split_bytes(data: Column) -> Column:
    """Binary ``data`` split on the byte ``\\n`` (a final empty piece kept, as ``split`` keeps it),
    each piece its bytes as they are, as a string: what ``split`` gives text that is UTF-8.

    In SQL, not in a Python UDF: with a UDF in the plan, every segment's text passes through its
    operator and Python workers start, for the rare segment that is not UTF-8. In hex with a
    space before every byte (``" 7B 0A 41"``), ``" 0A"`` is exactly a newline byte.
    """
    spaced = F.regexp_replace(F.hex(data), "(..)", " $1")
    return F.transform(
        F.split(spaced, " 0A", -1), lambda piece: F.unhex(F.replace(piece, F.lit(" "), F.lit(""))).cast("string")
    )


def parsed_log(
    spark: SparkSession,
    lake: str,
    last_segment: int,
    *,
    first_segment: int = 1,
    max_clock_skew: int = LabConfig.max_clock_skew,
    max_line_bytes: int = LabConfig.max_line_bytes,
) -> DataFrame:
    """Segments ``1..last_segment`` (or from ``first_segment``) of the log, parsed and validated
    (``parse_events`` output): the one way the batch paths (recompute, replay, reconciliation)
    read the log. Pass the run's ``max-clock-skew`` and ``max-line-bytes`` settings: they decide
    which lines are dead letters."""
    raw = raw_log(spark, lake, last_segment, first_segment=first_segment, max_line_bytes=max_line_bytes)
    return raw.transform(parse_events, max_clock_skew=max_clock_skew)


def segment_stamps(spark: SparkSession, lake: str, last_segment: int) -> DataFrame:
    """``segment``, ``appended_at`` of segments ``1..last_segment`` (null: no stamp), read from
    their headers on the driver: what a line known by its position and bytes alone (a dead
    letter's row) is parsed again with."""
    log = EventLog(lake)
    rows = [(number, log.stamp(number)) for number in range(1, last_segment + 1)]
    return spark.createDataFrame(rows, "segment long, appended_at string")

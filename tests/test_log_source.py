"""The log as a Spark source: batch ranges, and a stream that takes one segment per batch."""

import tracemalloc

import pytest
from pyspark.sql import functions as F

from shared.eventlog import SEGMENT_HEADER, EventLog, scan_lines
from shared.log_source import log_reader, log_stream_reader, parsed_log, raw_log


@pytest.fixture
def log_lake(tmp_path):
    log = EventLog(tmp_path)
    log.append(["a1", "a2"], stamp=False)
    log.append(["b1"], stamp=False)
    log.append(["c1", "", "c3"], stamp=False)
    return tmp_path


def test_batch_read_numbers_lines_per_segment(spark, log_lake):
    rows = log_reader(spark).option("path", str(log_lake)).load().collect()
    assert sorted(tuple(r) for r in rows) == [
        (1, 1, "a1", 2, None),
        (1, 2, "a2", 2, None),
        (2, 1, "b1", 2, None),
        (3, 1, "c1", 2, None),
        (3, 2, "", 0, None),
        (3, 3, "c3", 2, None),
    ]


def test_batch_read_of_a_segment_range(spark, log_lake):
    reader = log_reader(spark).option("path", str(log_lake))
    rows = reader.option("start", 2).option("end", 2).load().collect()
    assert [tuple(r) for r in rows] == [(2, 1, "b1", 2, None)]
    with pytest.raises(Exception, match="segments 1..9 requested, log has 1..3"):
        reader.option("start", 1).option("end", 9).load().collect()


def test_stream_takes_segments_in_order_one_per_batch(spark, log_lake, tmp_path):
    seen = []

    def record(batch, batch_id):
        seen.append((batch_id, sorted({r.segment for r in batch.collect()}), batch.count()))

    def run(per_batch, checkpoint):
        query = (
            log_stream_reader(spark)
            .option("path", str(log_lake))
            .option("segmentsPerBatch", per_batch)
            .load()
            .writeStream.foreachBatch(record)
            .option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()

    run(1, tmp_path / "cp")
    assert seen == [(0, [1], 2), (1, [2], 1), (2, [3], 3)]

    # a restarted query goes on after the last committed segment
    EventLog(log_lake).append(["d1"], stamp=False)
    run(1, tmp_path / "cp")
    assert seen[3:] == [(3, [4], 1)]

    seen.clear()
    run(3, tmp_path / "cp-wide")
    assert seen == [(0, [1, 2, 3], 6), (1, [4], 1)]


def as_bytes(frame) -> list[tuple]:
    """Rows with ``raw_line`` as its bytes (collecting a string would decode them)."""
    raw = F.col("raw_line").cast("binary").alias("raw")
    rows = frame.select("segment", "line_number", raw, "line_bytes", "appended_at").collect()
    return sorted((r.segment, r.line_number, bytes(r.raw), r.line_bytes, r.appended_at) for r in rows)


STAMP = "2026-01-05T10:00:00.000000Z"
HEADER = SEGMENT_HEADER + STAMP.encode() + b"\n"


SEGMENTS = [
    b'{"x": "\xff"}\nab\xc3\xa9\r\nlast',  # not UTF-8: kept as it is; \r kept; no final newline
    b"ok\n",
    b"",
    b"\n\n",
    b"\xef\xbb\xbfbom\n\xef\xbb\xbfnot at the start\n",  # a byte order mark opening a segment is not part of its line
    b"a\rb\n\xed\xa0\x80surrogate\n\xc0\xafoverlong\n",
    b"tab\tx\x00nul\n\xe2\x80\xa8sep\n",
    b"short\n"
    + b"y" * 3000
    + b"\nafter\n"
    + "\u20ac".encode() * 400
    + b"\n\xff" * 2000,  # lines longer than 1,024 bytes
    b"\xef\xbb\xbf",
    # a stamped segment: its header is no line; a byte order mark after it opens the lines
    HEADER + b"\xef\xbb\xbf{}\n" + HEADER,
    HEADER + b"\xff\n",  # not UTF-8 after the header
    HEADER,  # a stamped segment of no line
    HEADER[:-2] + b"\n",  # not a header: a time as the log writes it is needed
]


def test_raw_log_reads_what_the_source_reads_byte_for_byte(spark, tmp_path):
    """Spark's text reader split in SQL (in Python where a segment is not UTF-8), the source's
    chunks, and ``raw_log`` sending every segment to the source: the same rows, byte for byte."""
    log = EventLog(tmp_path)
    log.root.mkdir(parents=True)
    for number, data in enumerate(SEGMENTS, start=1):
        log.segment_path(number).write_bytes(data)
    (log.root / ".incoming-x.tmp").write_bytes(b"not published\n")
    last = len(SEGMENTS)
    source = log_reader(spark).option("path", str(tmp_path)).option("maxLineBytes", 1024).load()
    whole = as_bytes(raw_log(spark, str(tmp_path), last, max_line_bytes=1024))
    assert (
        whole
        == as_bytes(source)
        == as_bytes(raw_log(spark, str(tmp_path), last, max_line_bytes=1024, whole_segment_bytes=0))
    )
    assert [row for row in whole if row[0] in (1, 5, 8, 9, 10, 11, 12, 13) and row[1] <= 4] == [
        (1, 1, b'{"x": "\xff"}', 10, None),
        (1, 2, b"ab\xc3\xa9\r", 5, None),
        (1, 3, b"last", 4, None),
        (5, 1, b"bom", 3, None),
        (5, 2, b"\xef\xbb\xbfnot at the start", 19, None),
        (8, 1, b"short", 5, None),
        (8, 2, b"y" * 1024, 3000, None),
        (8, 3, b"after", 5, None),
        (8, 4, "\u20ac".encode() * 341 + b"\xe2", 1200, None),
        (10, 1, b"{}", 2, STAMP),
        (10, 2, HEADER[:-1], len(HEADER) - 1, STAMP),
        (11, 1, b"\xff", 1, STAMP),
        (13, 1, HEADER[:-2], len(HEADER) - 2, None),
    ]
    lines_per_segment = {number: sum(1 for row in whole if row[0] == number) for number in range(1, last + 1)}
    assert lines_per_segment == {
        1: 3,
        2: 1,
        3: 0,
        4: 2,
        5: 2,
        6: 3,
        7: 2,
        8: 4 + 2000,
        9: 0,
        10: 2,
        11: 1,
        12: 0,
        13: 1,
    }
    assert raw_log(spark, str(tmp_path), 0).count() == 0
    with pytest.raises(ValueError, match="segments 1..14 requested, log has 1..13"):
        raw_log(spark, str(tmp_path), 14)


def test_lines_that_span_chunks_are_split_as_a_whole_segment_read_splits_them(spark, tmp_path):
    """A 5 MiB segment read in 1 MiB chunks: lines across chunk ends, a line longer than a chunk
    but within the limit, one longer than the limit, a byte order mark at the second chunk's
    start (kept: it does not open the segment)."""
    lengths = [1, 1048574, 0, 2, 1500000, 3, 1048575, 5, 1048576, 7, 300000, 2]
    data = b"\n".join(bytes([65 + index % 26]) * length for index, length in enumerate(lengths))
    data = data[:1048576] + b"\xef\xbb\xbf" + data[1048576:] + b"\n"
    log = EventLog(tmp_path)
    log.root.mkdir(parents=True)
    log.segment_path(1).write_bytes(data)
    whole = as_bytes(raw_log(spark, str(tmp_path), 1, max_line_bytes=1_200_000))
    chunked = as_bytes(raw_log(spark, str(tmp_path), 1, max_line_bytes=1_200_000, whole_segment_bytes=0))
    assert whole == chunked
    assert [row[3] for row in whole] == [1, 1048574 + 3, 0, 2, 1500000, 3, 1048575, 5, 1048576, 7, 300000, 2]
    assert [len(row[2]) for row in whole] == [1, 1048574 + 3, 0, 2, 1024, 3, 1048575, 5, 1048576, 7, 300000, 2]
    assert whole[1][2].endswith(b"B\xef\xbb\xbf")


def test_a_huge_line_is_never_held_whole_and_the_lines_after_it_still_parse(spark, tmp_path):
    from tests.conftest import event_line

    log = EventLog(tmp_path)
    huge = '{"event_id": "' + "x" * (3 * 256) + '"}'
    log.append([event_line(event_id="before"), huge, event_line(event_id="after")], stamp=False)
    rows = parsed_log(spark, str(tmp_path), 1, max_line_bytes=256).orderBy("line_number").collect()
    assert [(r.event_id, r.reject_reason, r.reject_detail, r.raw_line) for r in rows] == [
        ("before", None, None, event_line(event_id="before")),
        (None, "line_too_long", f"{len(huge)} bytes", huge[:256]),
        ("after", None, None, event_line(event_id="after")),
    ]
    # Memory: a 64 MiB line, read with a limit of 1,024 bytes, costs the reader about one chunk.
    path = tmp_path / "segment.jsonl"
    with path.open("wb") as handle:
        handle.write(b"first\n")
        for _ in range(64):
            handle.write(b"z" * (1 << 20))
        handle.write(b"\nlast\n")
    tracemalloc.start()
    try:
        with path.open("rb") as handle:
            lines = [(line[:8], length) for batch in scan_lines(handle, 1024) for line, length in zip(*batch)]
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert lines == [(b"first", 5), (b"z" * 8, 64 << 20), (b"last", 4)]
    assert peak < 4 << 20, f"the reader held {peak:,} bytes at once"

"""The log as a Spark source: batch ranges, and a stream that takes one segment per batch."""

import pytest

from shared.eventlog import EventLog
from shared.log_source import SOURCE_NAME


@pytest.fixture
def log_lake(tmp_path):
    log = EventLog(tmp_path)
    log.append(["a1", "a2"], stamp=False)
    log.append(["b1"], stamp=False)
    log.append(["c1", "", "c3"], stamp=False)
    return tmp_path


def test_batch_read_numbers_lines_per_segment(spark, log_lake):
    rows = spark.read.format(SOURCE_NAME).option("path", str(log_lake)).load().collect()
    assert sorted(tuple(r) for r in rows) == [
        (1, 1, "a1"), (1, 2, "a2"), (2, 1, "b1"), (3, 1, "c1"), (3, 2, ""), (3, 3, "c3"),
    ]


def test_batch_read_of_a_segment_range(spark, log_lake):
    reader = spark.read.format(SOURCE_NAME).option("path", str(log_lake))
    rows = reader.option("start", 2).option("end", 2).load().collect()
    assert [tuple(r) for r in rows] == [(2, 1, "b1")]
    with pytest.raises(Exception, match="segments 1..9 requested, log has 1..3"):
        reader.option("start", 1).option("end", 9).load().collect()


def test_stream_takes_segments_in_order_one_per_batch(spark, log_lake, tmp_path):
    seen = []

    def record(batch, batch_id):
        seen.append((batch_id, sorted({r.segment for r in batch.collect()}), batch.count()))

    def run(per_batch, checkpoint):
        query = (
            spark.readStream.format(SOURCE_NAME)
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


def test_raw_log_reads_what_the_source_reads_byte_for_byte(spark, tmp_path):
    """Spark's text reader split in SQL, and Python's escapes where a segment is not UTF-8."""
    from shared.log_source import raw_log

    segments = [
        b'{"x": "\xff"}\nab\xc3\xa9\r\nlast',  # not UTF-8: \xNN escapes; \r kept; no final newline
        b"ok\n",
        b"",
        b"\n\n",
        b"\xef\xbb\xbfbom\n",
        b"a\rb\n\xed\xa0\x80surrogate\n\xc0\xafoverlong\n",
        b"tab\tx\x00nul\n\xe2\x80\xa8sep\n",
    ]
    log = EventLog(tmp_path)
    log.root.mkdir(parents=True)
    for number, data in enumerate(segments, start=1):
        log.segment_path(number).write_bytes(data)
    (log.root / ".incoming-x.tmp").write_bytes(b"not published\n")
    source = spark.read.format(SOURCE_NAME).option("path", str(tmp_path)).load()
    assert sorted(map(tuple, raw_log(spark, str(tmp_path), 7).collect())) == sorted(map(tuple, source.collect()))
    assert sorted(map(tuple, raw_log(spark, str(tmp_path), 1).collect())) == [
        (1, 1, '{"x": "\\xff"}'), (1, 2, "ab\u00e9\r"), (1, 3, "last"),
    ]
    assert raw_log(spark, str(tmp_path), 0).count() == 0
    with pytest.raises(ValueError, match="segments 1..8 requested, log has 1..7"):
        raw_log(spark, str(tmp_path), 8)

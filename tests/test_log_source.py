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

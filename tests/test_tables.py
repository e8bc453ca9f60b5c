"""Delta tables on disk through delta-rs: idempotent appends, predicate overwrite, time travel."""

import pytest

from shared.tables import TableNameError, Tables


@pytest.fixture
def tables(spark, tmp_path):
    return Tables(spark, tmp_path, "deltalake")


def frame(spark, rows):
    return spark.createDataFrame(rows, "day string, account_id string, n long")


def test_retried_append_with_the_same_app_version_changes_nothing(spark, tables):
    assert tables.append("speed_aggregates", frame(spark, [("d1", "a", 1)]), app_id="q1", version=0)
    assert tables.append("speed_aggregates", frame(spark, [("d1", "b", 2)]), app_id="q1", version=1)
    version = tables.version("speed_aggregates")
    assert not tables.append("speed_aggregates", frame(spark, [("d1", "b", 2)]), app_id="q1", version=1)
    assert not tables.append("speed_aggregates", frame(spark, [("d1", "a", 1)]), app_id="q1", version=0)
    assert tables.version("speed_aggregates") == version
    assert sorted(tables.read_arrow("speed_aggregates").to_pylist(), key=lambda r: r["n"]) == [
        {"day": "d1", "account_id": "a", "n": 1},
        {"day": "d1", "account_id": "b", "n": 2},
    ]
    assert tables.committed_version("speed_aggregates", "q1") == 1
    assert tables.committed_version("speed_aggregates", "other") is None
    # another application's version 1 is its own
    assert tables.append("speed_aggregates", frame(spark, [("d1", "c", 3)]), app_id="q2", version=1)
    assert tables.read_arrow("speed_aggregates").num_rows == 3


def test_overwrite_by_predicate_replaces_only_that_partition(spark, tables):
    tables.overwrite("batch_truth", frame(spark, [("d1", "a", 1), ("d2", "a", 2)]), partition_by=["day"])
    tables.overwrite("batch_truth", frame(spark, [("d1", "z", 9)]), predicate="day = 'd1'", partition_by=["day"])
    tables.overwrite("batch_truth", frame(spark, [("d1", "z", 9)]), predicate="day = 'd1'", partition_by=["day"])
    rows = sorted((r["day"], r["account_id"], r["n"]) for r in tables.read_arrow("batch_truth").to_pylist())
    assert rows == [("d1", "z", 9), ("d2", "a", 2)]


def test_time_travel_and_spark_read(spark, tables):
    tables.overwrite("batch_truth", frame(spark, [("d1", "a", 1)]))
    tables.overwrite("batch_truth", frame(spark, [("d1", "a", 5)]))
    assert [r.n for r in tables.read("batch_truth", version=0).collect()] == [1]
    assert [r.n for r in tables.read("batch_truth").collect()] == [5]


def test_empty_frames_create_tables_with_their_schema(spark, tables):
    tables.overwrite("dead_letter", frame(spark, []))
    assert tables.read_arrow("dead_letter").column_names == ["day", "account_id", "n"]
    assert tables.read_arrow("dead_letter").num_rows == 0


def test_table_names_are_checked(tables):
    assert tables.path("kappa/run-1/speed_aggregates").name == "speed_aggregates"
    with pytest.raises(TableNameError):
        tables.path("../escape")
    with pytest.raises(FileNotFoundError, match="table missing does not exist"):
        tables.read_arrow("missing")

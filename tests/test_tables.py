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


def test_spark_reads_the_same_table_natively_and_through_arrow(spark, tables, monkeypatch):
    """Big files are read by Spark's Parquet reader, small ones through delta-rs: same result."""
    import datetime as dt
    from decimal import Decimal

    import pyarrow as pa

    import shared.tables as module

    utc = dt.timezone.utc
    rows = pa.table({
        "window_start": pa.array([dt.datetime(2026, 1, 5, 10, 0, tzinfo=utc), None], pa.timestamp("us", tz="UTC")),
        "account_id": ["a", "b"],
        "amount_total": pa.array([Decimal("1.000001"), Decimal("-2.5")], pa.decimal128(38, 6)),
        "amounts": pa.array([[("USD", Decimal("1"))], []], pa.map_(pa.string(), pa.decimal128(38, 6))),
        "n": pa.array([1, 2], pa.int64()),
    })
    tables.overwrite("speed_aggregates", rows)
    tables.overwrite("speed_aggregates", rows.slice(0, 1))
    read = {}
    for path, threshold in (("native", 0), ("arrow", 10**12)):
        monkeypatch.setattr(module, "_NATIVE_READ_MIN_ROWS_PER_FILE", threshold)
        frames = tables.read("speed_aggregates", version=0), tables.read("speed_aggregates")
        read[path] = [([(f.name, f.dataType) for f in frame.schema], sorted(frame.collect(), key=lambda r: r.n)) for frame in frames]
        assert ("Scan parquet" in frames[0]._jdf.queryExecution().simpleString()) == (path == "native")
    assert read["native"] == read["arrow"]
    (schema, old), (_, new) = read["native"]
    assert [name for name, _ in schema] == rows.column_names
    assert [(r.account_id, r.amount_total, r.amounts, r.window_start) for r in old] == [
        ("a", Decimal("1.000001"), {"USD": Decimal("1.000000")}, dt.datetime(2026, 1, 5, 10, 0)),
        ("b", Decimal("-2.500000"), {}, None),
    ]
    assert [r.n for r in new] == [1]

    # A partitioned table keeps its partition column: delta-rs reads it, whatever the file size.
    monkeypatch.setattr(module, "_NATIVE_READ_MIN_ROWS_PER_FILE", 0)
    tables.overwrite("batch_truth", frame(spark, [("d1", "a", 1), ("d2", "b", 2)]), partition_by=["day"])
    assert sorted(tuple(r) for r in tables.read("batch_truth").collect()) == [("d1", "a", 1), ("d2", "b", 2)]

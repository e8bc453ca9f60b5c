"""Delta tables on disk through delta-rs: idempotent appends, predicate overwrite, time travel."""

from datetime import UTC, date, datetime

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lklab.pipelines.unique_visitors.tables import VISITORS_STREAM_METRICS
from shared.catalog import LATENCY_COLUMNS
from shared.partitions import DayRange, predicate_range
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


def test_upsert_deletes_updates_only_given_columns_of_partial_rows_and_inserts(spark, tmp_path):
    import pyarrow as pa

    tables = Tables(spark, tmp_path, "deltalake", keep_open=True)

    def rows(*values):
        names = ("day", "account_id", "n", "status", "_delete", "_partial")
        return pa.table(dict(zip(names, map(list, zip(*values)))))

    keys = ("day", "account_id")
    tables.upsert(
        "speed_aggregates",
        rows(
            ("d1", "a", 1, "open", False, False),
            ("d1", "b", 2, "open", False, False),
            ("d2", "x", 0, "open", False, True),
        ),
        keys=keys,
        app_id="s",
        version=0,
    )
    changes = rows(
        ("d1", "a", 99, "final", False, True),  # partial: only the status changes
        ("d1", "b", 0, "open", True, False),  # deleted
        ("d2", "c", 3, "open", False, False),  # inserted
        ("d2", "z", 7, "final", False, True),  # partial without a match: nothing
    )
    assert tables.upsert(
        "speed_aggregates",
        changes,
        keys=keys,
        app_id="s",
        version=1,
        partial_columns=("status",),
        target_filter="t.day >= 'd1'",
    )
    assert not tables.upsert("speed_aggregates", changes, keys=keys, app_id="s", version=1, partial_columns=("status",))
    got = sorted(
        (r["day"], r["account_id"], r["n"], r["status"]) for r in tables.read_arrow("speed_aggregates").to_pylist()
    )
    assert got == [("d1", "a", 1, "final"), ("d2", "c", 3, "open")]


def test_table_names_are_checked(tables):
    assert tables.path("kappa/run-1/speed_aggregates").name == "speed_aggregates"
    with pytest.raises(TableNameError):
        tables.path("../escape")
    with pytest.raises(FileNotFoundError, match="table missing does not exist"):
        tables.read_arrow("missing")


def test_spark_reads_the_same_table_natively_and_through_arrow(spark, tables):
    """One 10,000-row file is read by Spark's Parquet reader; the same rows in two files of
    5,000 through delta-rs's Arrow. Same schema and rows either way, time travel included."""
    import datetime as dt
    from decimal import Decimal

    import pyarrow as pa

    utc = dt.UTC
    n = 10_000
    rows = pa.table(
        {
            "window_start": pa.array(
                [
                    None if i % 7 == 0 else dt.datetime(2026, 1, 5, tzinfo=utc) + dt.timedelta(seconds=i)
                    for i in range(n)
                ],
                pa.timestamp("us", tz="UTC"),
            ),
            "account_id": [f"a{i % 13}" for i in range(n)],
            "amount_total": pa.array([Decimal(i) / 1_000_000 - 3 for i in range(n)], pa.decimal128(38, 6)),
            "amounts": pa.array(
                [[("USD", Decimal(i))] if i % 2 else [] for i in range(n)], pa.map_(pa.string(), pa.decimal128(38, 6))
            ),
            "n": pa.array(range(n), pa.int64()),
        }
    )
    tables.overwrite("speed_aggregates", rows)  # v0: one file of 10,000 rows
    tables.overwrite("speed_aggregates", rows.slice(0, n // 2))  # v1: 5,000
    tables.overwrite("late_events", rows.slice(0, n // 2))  # v0: 5,000
    tables.append("late_events", rows.slice(n // 2), app_id="t", version=0)  # v1: two files of 5,000

    def read(name, version=None):
        frame = tables.read(name, version)
        native = "Scan parquet" in frame._jdf.queryExecution().simpleString()
        return native, [(f.name, f.dataType) for f in frame.schema], sorted(frame.collect(), key=lambda r: r.n)

    native, schema, whole = read("speed_aggregates", 0)
    arrow_native, arrow_schema, arrow_whole = read("late_events")
    assert (native, arrow_native) == (True, False)
    assert (schema, whole) == (arrow_schema, arrow_whole)
    assert [name for name, _ in schema] == rows.column_names
    assert [(r.n, r.account_id, r.amount_total, r.amounts, r.window_start) for r in whole[:2]] == [
        (0, "a0", Decimal("-3.000000"), {}, None),
        (1, "a1", Decimal("-2.999999"), {"USD": Decimal("1.000000")}, dt.datetime(2026, 1, 5, 0, 0, 1)),
    ]
    latest_native, _, latest = read("speed_aggregates")
    assert latest_native is False and latest == read("late_events", 0)[2] == whole[: n // 2]

    # A partitioned table keeps its partition column: delta-rs reads it, whatever the file size.
    days = pa.table({"day": ["d1"] * n, "account_id": rows["account_id"], "n": rows["n"]})
    tables.overwrite("batch_truth", days, partition_by=["day"])
    native, schema, partitioned = read("batch_truth")
    assert not native
    assert sorted(name for name, _ in schema) == ["account_id", "day", "n"]
    assert [(r.day, r.n) for r in partitioned[:2]] == [("d1", 0), ("d1", 1)] and len(partitioned) == n


def test_spark_frames_are_written_by_the_tasks_and_committed_once(spark, tables):
    """An unpartitioned predicate overwrite in one commit: the rows of the days it replaces go,
    the other rows of the same files are written again, and every file is a part of the table."""
    two_days = frame(spark, [("d1", "a", 1), ("d2", "a", 2), ("d2", "b", 3)]).repartition(2)
    assert tables.overwrite("batch_truth", two_days)
    before = tables.version("batch_truth")
    assert tables.overwrite(
        "batch_truth", frame(spark, [("d2", "z", 9)]), predicate="day = 'd2'", app_id="run", version=1
    )
    assert not tables.overwrite(
        "batch_truth", frame(spark, [("d2", "y", 8)]), predicate="day = 'd2'", app_id="run", version=1
    )
    assert tables.version("batch_truth") == before + 1
    rows = sorted((r["day"], r["account_id"], r["n"]) for r in tables.read_arrow("batch_truth").to_pylist())
    assert rows == [("d1", "a", 1), ("d2", "z", 9)]
    in_table = {uri.rsplit("/", 1)[-1] for uri in tables._delta("batch_truth", None).file_uris()}
    assert in_table and in_table <= {p.name for p in tables.path("batch_truth").glob("*.parquet")}


def test_a_predicate_overwrite_keeps_every_other_row_and_leaves_the_files_it_does_not_match(spark, tables):
    """Only the files holding a matching row are removed; their other rows (a null day included:
    a predicate that is not true keeps its row) are written again, the other files stay."""
    tables.overwrite("batch_truth", frame(spark, [("d1", "a", 1), (None, "n", 7), ("d2", "a", 2)]).coalesce(1))
    tables.overwrite("batch_truth", frame(spark, [("d3", "a", 3)]), predicate="day = 'd3'")
    untouched = {uri.rsplit("/", 1)[-1] for uri in tables._delta("batch_truth", None).file_uris()}
    tables.overwrite("batch_truth", frame(spark, [("d2", "z", 9)]), predicate="day = 'd2'")
    rows = sorted(((r["day"] or ""), r["account_id"], r["n"]) for r in tables.read_arrow("batch_truth").to_pylist())
    assert rows == [("", "n", 7), ("d1", "a", 1), ("d2", "z", 9), ("d3", "a", 3)]
    now = {uri.rsplit("/", 1)[-1] for uri in tables._delta("batch_truth", None).file_uris()}
    assert len(untouched) == 2 and len(untouched & now) == 1  # d3's file stays; the one with d2 is replaced


def test_a_columns_range_comes_from_the_files_footers_or_not_at_all(spark, tables, tmp_path):
    """The smallest and largest value over every file and row group, nulls and all-null row
    groups left out; None for text, or where a file records no statistics for the column."""
    times = "day string, account_id string, n long, at timestamp"
    rows = [("d1", "a", 5, "2026-01-05 10:00:00"), ("d2", "b", -3, None), ("d3", "c", 9, "2026-01-04 23:59:59")]
    frame_of = lambda rows: spark.createDataFrame(rows, times.replace("timestamp", "string")).selectExpr(  # noqa: E731
        "day", "account_id", "n", "cast(at as timestamp) as at"
    )
    tables.overwrite("batch_truth", frame_of(rows).repartition(3))  # Spark's files
    tables.append(
        "batch_truth",
        pa.table({"day": ["d4"], "account_id": [None], "n": [4], "at": pa.nulls(1, pa.timestamp("us", "UTC"))}),
        app_id="t",
        version=1,
    )
    assert tables.column_range("batch_truth", "n") == (-3, 9)
    low, high = tables.column_range("batch_truth", "at")
    assert (low.isoformat(), high.isoformat()) == ("2026-01-04T23:59:59+00:00", "2026-01-05T10:00:00+00:00")
    assert tables.column_range("batch_truth", "account_id") is None  # text: statistics may be cut short
    assert tables.column_range("batch_truth", "absent") is None
    only_nulls = Tables(spark, tmp_path / "nulls", "deltalake")
    only_nulls.append("batch_truth", pa.table({"n": pa.nulls(2, pa.int64())}), app_id="t", version=1)
    assert only_nulls.column_range("batch_truth", "n") == (None, None)
    # a file written without statistics: its footer cannot say, so neither can the table
    bare = Tables(spark, tmp_path / "bare", "deltalake")
    bare.append("batch_truth", pa.table({"n": [1, 2]}), app_id="t", version=1)
    (path,) = bare._delta("batch_truth", None).file_uris()
    pq.write_table(pa.table({"n": [1, 2]}), path.removeprefix("file://"), write_statistics=False)
    assert bare.column_range("batch_truth", "n") is None


def test_a_day_range_overwrite_scans_only_the_files_whose_footers_allow_the_day(spark, tables):
    """Replacing a day the table does not hold runs no Spark job to find files (their footers
    rule every file out); replacing a held day removes exactly that day's file."""
    days = lambda *rows: spark.createDataFrame(  # noqa: E731
        [(f"2026-01-0{d} 12:00:00", f"a{d}", d) for d in rows], "at string, account_id string, n long"
    ).selectExpr("cast(at as timestamp) as window_start", "account_id", "n")
    files = lambda: {u.rsplit("/", 1)[-1] for u in tables._delta("batch_truth", None).file_uris()}  # noqa: E731
    of_day = {}
    for day in (1, 2, 3):  # one file a day
        held = files() if tables.exists("batch_truth") else set()
        tables.overwrite(
            "batch_truth", days(day), predicate=DayRange(date(2026, 1, day), date(2026, 1, day)).predicate()
        )
        (of_day[day],) = files() - held

    def jobs_of(day: int, rows) -> int:
        tracker, group = spark.sparkContext.statusTracker(), f"overwrite-{day}-{len(files())}"
        spark.sparkContext.setJobGroup(group, group)
        try:
            tables.overwrite(
                "batch_truth", rows, predicate=DayRange(date(2026, 1, day), date(2026, 1, day)).predicate()
            )
        finally:
            spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)
        return len(tracker.getJobIdsForGroup(group))

    new_day, held_day = jobs_of(4, days(4)), jobs_of(2, days(2, 2))
    # the new day: the write's one job and no scan; the held day: the scan that finds its file too
    assert new_day == 1 and held_day > new_day
    assert set(of_day.values()) - files() == {of_day[2]}  # day 2's file replaced, the others kept
    rows = sorted((r["account_id"], r["n"]) for r in tables.read_arrow("batch_truth").to_pylist())
    assert rows == [("a1", 1), ("a2", 2), ("a2", 2), ("a3", 3), ("a4", 4)]


def test_a_predicate_written_by_a_day_range_is_read_back():
    predicate = DayRange(date(2026, 1, 30), date(2026, 2, 1)).predicate()
    assert predicate_range(predicate) == (
        "window_start",
        datetime(2026, 1, 30, tzinfo=UTC),
        datetime(2026, 2, 2, tzinfo=UTC),
    )
    assert predicate_range("day = 'd2'") is None
    assert predicate_range(None) is None
    assert predicate_range(predicate.replace("AND", "OR")) is None


def test_insert_new_adds_only_rows_whose_keys_are_new(spark, tables):
    lines = lambda rows: spark.createDataFrame(rows, "segment long, line_number long, raw_line string")
    assert tables.insert_new(
        "dead_letter", lines([(1, 1, "x"), (1, 2, "y")]), keys=("segment", "line_number"), app_id="b", version=1
    )
    assert tables.insert_new(
        "dead_letter", lines([(1, 2, "y"), (2, 1, "z")]), keys=("segment", "line_number"), app_id="b", version=2
    )
    assert not tables.insert_new(
        "dead_letter", lines([(3, 1, "w")]), keys=("segment", "line_number"), app_id="b", version=2
    )
    assert sorted(tuple(r.values()) for r in tables.read_arrow("dead_letter").to_pylist()) == [
        (1, 1, "x"),
        (1, 2, "y"),
        (2, 1, "z"),
    ]


def test_an_append_adds_a_column_the_table_lacks_only_when_asked(tables):
    # a metrics table written before it had ``duration_seconds``, as an older lake holds it
    older = pa.table({"batch_id": pa.array([0], pa.int64()), "input_lines": pa.array([3], pa.int64())})
    newer = older.append_column("duration_seconds", pa.array([0.25])).set_column(0, "batch_id", pa.array([1]))
    tables.append("stream_metrics", older, app_id="speed", version=0)
    with pytest.raises(Exception, match="(?i)schema"):
        tables.append("stream_metrics", newer, app_id="speed", version=1)
    assert tables.append("stream_metrics", newer, app_id="speed", version=1, add_columns=True)
    assert tables.read_arrow("stream_metrics").sort_by("batch_id").to_pylist() == [
        {"batch_id": 0, "input_lines": 3, "duration_seconds": None},
        {"batch_id": 1, "input_lines": 3, "duration_seconds": 0.25},
    ]
    # the stream sink appends them so
    assert VISITORS_STREAM_METRICS.added == ("duration_seconds", "committed_at", *LATENCY_COLUMNS[1:])

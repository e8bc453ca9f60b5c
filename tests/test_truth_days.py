"""The days a reconcile of every day covers: the first and last UTC day of ``batch_truth``'s
windows, read from its files' statistics, and from its rows when a file records none."""

import datetime as dt
from decimal import Decimal

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import Schema
from deltalake.transaction import AddAction, create_table_with_add_actions

from reconciliation.reconcile import ReconcileInputError, _truth_days
from shared.aggregation import AGGREGATE_ARROW_SCHEMA
from shared.catalog import BATCH_TRUTH
from shared.partitions import DayRange
from shared.tables import Tables


def windows(*starts: str) -> pa.Table:
    times = [dt.datetime.fromisoformat(s) for s in starts]
    return pa.table(
        {
            "window_start": times,
            "window_end": [t + dt.timedelta(minutes=1) for t in times],
            "account_id": ["a"] * len(times),
            "currency": ["USD"] * len(times),
            "event_count": [1] * len(times),
            "amount_total": [Decimal("1.5")] * len(times),
        },
        schema=AGGREGATE_ARROW_SCHEMA,
    )


def test_every_day_is_the_days_the_truth_holds_from_footers_or_rows(spark, tmp_path):
    tables = Tables(spark, tmp_path, "deltalake")
    # 23:59 UTC on the 4th and 00:00 UTC on the 6th: an offset in the text must not move a day
    rows = windows("2026-01-05T12:00:00+00:00", "2026-01-04T23:59:00+00:00", "2026-01-06T01:00:00+01:00")
    tables.overwrite(BATCH_TRUTH.name, spark.createDataFrame(rows.to_pandas()).repartition(2))
    assert tables.column_range(BATCH_TRUTH.name, "window_start") is not None  # read from the footers
    assert _truth_days(tables, DayRange()) == DayRange(dt.date(2026, 1, 4), dt.date(2026, 1, 6))
    assert _truth_days(tables, DayRange(dt.date(2026, 1, 5), dt.date(2026, 1, 5))) == DayRange(
        dt.date(2026, 1, 5), dt.date(2026, 1, 5)
    )  # days asked are kept as asked
    # the same rows in a file written without statistics: the rows say it (a Spark job), the same
    bare = Tables(spark, tmp_path / "bare", "deltalake")
    root = bare.path(BATCH_TRUTH.name)
    root.mkdir(parents=True)
    pq.write_table(rows, root / "part-0.parquet", write_statistics=False)
    add = AddAction("part-0.parquet", (root / "part-0.parquet").stat().st_size, {}, 0, True, '{"numRecords": 3}')
    create_table_with_add_actions(str(root), Schema.from_arrow(AGGREGATE_ARROW_SCHEMA), [add], mode="append")
    assert bare.column_range(BATCH_TRUTH.name, "window_start") is None
    assert _truth_days(bare, DayRange()) == DayRange(dt.date(2026, 1, 4), dt.date(2026, 1, 6))


def test_an_empty_truth_is_a_clear_error(spark, tmp_path):
    tables = Tables(spark, tmp_path, "deltalake")
    tables.overwrite(BATCH_TRUTH.name, windows())
    with pytest.raises(ReconcileInputError, match="batch_truth is empty: run 'lklab batch' first"):
        _truth_days(tables, DayRange())

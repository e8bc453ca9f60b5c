"""The batch summary's pieces: the largest windows (ranked by Spark) and the comparison with the
generator's truth (in Arrow)."""

from __future__ import annotations

import dataclasses
import datetime as dt
from decimal import Decimal as D

import pyarrow as pa

from lklab.pipelines.billing_windows.summary import largest_windows, same_rows
from shared.aggregation import AGGREGATE_COLUMNS

UTC = dt.UTC
AT = lambda minute: dt.datetime(2026, 1, 5, 10, minute, tzinfo=UTC)
SCHEMA = pa.schema(
    [
        ("window_start", pa.timestamp("us", tz="UTC")),
        ("window_end", pa.timestamp("us", tz="UTC")),
        ("account_id", pa.string()),
        ("currency", pa.string()),
        ("event_count", pa.int64()),
        ("amount_total", pa.decimal128(38, 6)),
    ]
)


def windows(*rows) -> pa.Table:
    """Rows of (minute, account, currency, events, amount) as one-minute windows."""
    return pa.Table.from_pylist(
        [dict(zip(AGGREGATE_COLUMNS, (AT(m), AT(m + 1), a, c, n, D(x)))) for m, a, c, n, x in rows], schema=SCHEMA
    )


def test_aggregate_columns_are_the_ones_built_here():
    assert tuple(SCHEMA.names) == AGGREGATE_COLUMNS


def test_the_largest_windows_by_absolute_amount_ties_by_window_account_currency(spark):
    truth = spark.createDataFrame(
        windows(
            (3, "b", "EUR", 1, "5.00"),
            (1, "a", "EUR", 2, "-9.50"),  # a refund: its size counts
            (2, "b", "USD", 1, "5.00"),
            (2, "a", "USD", 1, "5.00"),
            (2, "a", "EUR", 1, "5.00"),
            (0, "z", "JPY", 7, "1"),
        )
    )
    ranked = [
        (r["window_start"].minute, r["account_id"], r["currency"], r["amount_total"]) for r in largest_windows(truth, 4)
    ]
    assert ranked == [(1, "a", "EUR", D("-9.5")), (2, "a", "EUR", D(5)), (2, "a", "USD", D(5)), (2, "b", "USD", D(5))]
    assert len(largest_windows(truth, 10)) == 6
    assert largest_windows(truth, 0) == ()
    assert largest_windows(truth.limit(0), 5) == ()
    assert largest_windows(truth, 1)[0] == {  # the whole row, as the table holds it
        "window_start": AT(1),
        "window_end": AT(2),
        "account_id": "a",
        "currency": "EUR",
        "event_count": 2,
        "amount_total": D("-9.5"),
    }


def test_same_rows_ignores_order_and_declared_widths_but_not_values():
    truth = windows((1, "a", "EUR", 2, "1.50"), (2, "b", "USD", 1, "3"))
    reordered = truth.take([1, 0])
    narrower = truth.cast(SCHEMA.set(5, pa.field("amount_total", pa.decimal128(20, 6))))
    assert same_rows(truth, reordered)
    assert same_rows(truth, narrower)
    assert not same_rows(truth, windows((1, "a", "EUR", 2, "1.50"), (2, "b", "USD", 1, "3.000001")))
    assert not same_rows(truth, windows((1, "a", "EUR", 2, "1.50"), (2, "b", "USD", 2, "3")))
    assert not same_rows(truth, truth.slice(0, 1))
    not_counts = truth.set_column(4, "event_count", pa.array(["two", "one"]))  # cannot be cast to the counts' type
    assert not same_rows(truth, not_counts)


def test_the_summary_counts_the_requested_days_and_the_dead_letters_read_so_far(spark, tmp_path):
    from lklab.pipelines.billing_windows.summary import batch_summary
    from shared.batch_runs import BatchRun
    from shared.catalog import BATCH_DEAD_LETTER, BATCH_TRUTH, GENERATOR_TRUTH
    from shared.partitions import DayRange
    from shared.tables import Tables
    from shared.windows import TumblingWindows

    tables = Tables(spark, tmp_path, "deltalake")
    day = windows((1, "a", "EUR", 2, "1.50"), (2, "b", "EUR", 1, "-4"), (2, "a", "USD", 3, "7.25"))
    next_day = windows((1, "c", "JPY", 1, "900")).set_column(
        0, "window_start", pa.array([dt.datetime(2026, 1, 6, 10, 1, tzinfo=UTC)], SCHEMA.field("window_start").type)
    )
    tables.overwrite(BATCH_TRUTH.name, pa.concat_tables([day, next_day]))
    dead = BATCH_DEAD_LETTER.schema
    tables.overwrite(
        BATCH_DEAD_LETTER.name,
        pa.Table.from_pylist(
            [
                {"segment": 1, "line_number": 4, "raw_line": "{", "reject_reason": "not_json", "reject_detail": None},
                {
                    "segment": 2,
                    "line_number": 1,
                    "raw_line": "{}",
                    "reject_reason": "missing_field",
                    "reject_detail": "event_id",
                },
                {"segment": 2, "line_number": 2, "raw_line": "[]", "reject_reason": "not_json", "reject_detail": None},
                {
                    "segment": 3,
                    "line_number": 1,
                    "raw_line": "{",
                    "reject_reason": "not_json",
                    "reject_detail": None,
                },  # beyond the run
            ],
            schema=dead,
        ),
    )
    run = BatchRun(
        last_segment=2, lines=9, events=6, duplicates=0, dead_letters=3, days=DayRange.of("2026-01-05"), windows=3
    )

    summary = batch_summary(tables, run, TumblingWindows(60_000_000), top=2)
    assert (summary.windows, summary.accounts) == (3, 2)
    assert summary.money_by_currency == {"EUR": D("-2.5"), "USD": D("7.25")}
    assert summary.dead_letters_by_reason == {"missing_field": 1, "not_json": 2}
    assert [(r["account_id"], r["currency"], r["amount_total"]) for r in summary.largest_windows] == [
        ("a", "USD", D("7.25")),
        ("b", "EUR", D(-4)),
    ]
    assert summary.matches_generator_truth is None  # not a generated lake
    empty = batch_summary(tables, dataclasses.replace(run, days=DayRange.of("2026-01-07")), TumblingWindows(60_000_000))
    assert (empty.windows, empty.accounts, empty.money_by_currency, empty.largest_windows) == (0, 0, {}, ())

    tables.overwrite(GENERATOR_TRUTH.name, day)  # the generator's truth of the day: the same rows
    assert batch_summary(tables, run, TumblingWindows(60_000_000)).matches_generator_truth is True
    tables.overwrite(GENERATOR_TRUTH.name, day.slice(1))
    assert batch_summary(tables, run, TumblingWindows(60_000_000)).matches_generator_truth is False

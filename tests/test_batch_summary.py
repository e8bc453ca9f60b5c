"""The batch summary's Arrow pieces: the largest windows and the comparison with the generator's truth."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal as D

import pyarrow as pa

from lklab.summary import largest_windows, same_rows
from shared.aggregation import AGGREGATE_COLUMNS

UTC = dt.timezone.utc
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


def test_the_largest_windows_by_absolute_amount_ties_by_window_account_currency():
    truth = windows(
        (3, "b", "EUR", 1, "5.00"),
        (1, "a", "EUR", 2, "-9.50"),  # a refund: its size counts
        (2, "b", "USD", 1, "5.00"),
        (2, "a", "USD", 1, "5.00"),
        (2, "a", "EUR", 1, "5.00"),
        (0, "z", "JPY", 7, "1"),
    )
    ranked = [(r["window_start"].minute, r["account_id"], r["currency"], r["amount_total"]) for r in largest_windows(truth, 4)]
    assert ranked == [(1, "a", "EUR", D("-9.5")), (2, "a", "EUR", D(5)), (2, "a", "USD", D(5)), (2, "b", "USD", D(5))]
    assert len(largest_windows(truth, 10)) == 6
    assert largest_windows(truth, 0) == ()
    assert largest_windows(truth.slice(0, 0), 5) == ()


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

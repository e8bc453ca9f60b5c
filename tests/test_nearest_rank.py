"""``nearest_rank``, the one percentile of the lab: the textbook definition, NumPy's
``inverted_cdf`` where NumPy's floating point is exact, and decimal where it is not."""

from __future__ import annotations

from decimal import Decimal as D

import numpy as np
import pytest

from reconciliation.result import nearest_rank, rank_sql, weighted_nearest_rank, weighted_waits


def textbook(values: list, p: D):
    """The smallest value with at least ``p`` of the values at or below it (by counting)."""
    return min(v for v in values if sum(1 for w in values if w <= v) >= p * len(values))


def test_the_textbook_definition_on_small_exact_inputs():
    for n in range(1, 13):
        values = [D(10 + 3 * i) / 4 for i in range(n)]  # distinct, ascending, inexact in binary
        for k in range(1, 101):
            p = D(k) / 100
            assert nearest_rank(values, p) == textbook(values, p), (n, p)
    assert nearest_rank([D(1), D(2), D(2), D(3)], "0.5") == D(2)  # ties count once each
    assert nearest_rank([D(1), D(2)], 0) == D(1)


def test_the_weighted_form_is_the_rank_over_every_copy():
    """``weighted_nearest_rank`` over ``(value, count)`` pairs is ``nearest_rank`` over the
    values repeated; counts of zero (or less) stand for no copy."""
    pairs = [(D("0.5"), 3), (D(2), 0), (D(4), 1), (D(9), 6), (D(11), -2)]
    copies = [value for value, count in pairs for _ in range(max(count, 0))]
    assert len(copies) == 10
    for k in range(0, 101):
        p = D(k) / 100
        assert weighted_nearest_rank(pairs, p) == nearest_rank(copies, p), p
    assert [weighted_nearest_rank(pairs, p) for p in ("0.3", "0.31", "0.4", "0.41", "0.95")] == [
        D("0.5"),
        D(4),
        D(4),
        D(9),
        D(9),
    ]
    assert weighted_nearest_rank([], "0.5") is None and weighted_nearest_rank([(D(1), 0)], "0.5") is None
    with pytest.raises(ValueError, match="from 0 to 1"):
        weighted_nearest_rank(pairs, "1.5")


def test_the_summary_of_waits_sorts_them_and_rounds_to_the_microsecond():
    """``weighted_waits``: ``(copies, p50, p95, max)`` of unordered ``(seconds, count)`` pairs."""
    waits = [(2.0000004, 1), (0.25, 5), (9.5, 0), (1.1234567, 14)]
    assert weighted_waits(waits) == (20, 1.123457, 1.123457, 2.0)
    assert weighted_waits([(0.5, 3), (0.1, 17)]) == (20, 0.1, 0.5, 0.5)
    assert weighted_waits([(0.5, 3), (0.1, 18)]) == (21, 0.1, 0.5, 0.5)
    assert weighted_waits([(0.5, 1), (0.1, 19)]) == (20, 0.1, 0.1, 0.5)
    assert weighted_waits([]) is None and weighted_waits([(1.0, 0), (2.0, -1)]) is None


def test_numpy_inverted_cdf_where_its_floating_point_is_exact():
    """Dyadic probabilities of small counts: ``p * n`` is exact in binary, so NumPy's rank is."""
    for n in range(1, 41):
        values = list(range(100, 100 + 7 * n, 7))
        for k in range(0, 65):
            p = k / 64
            assert nearest_rank(values, D(k) / 64) == np.quantile(values, p, method="inverted_cdf"), (n, k)


def test_decimal_where_numpy_is_not():
    values = [D(v) for v in range(1, 101)]
    # 0.07 * 100 is 7.000000000000001 in binary floating point: NumPy takes rank 8
    assert np.quantile(np.array(values, dtype=object), 0.07, method="inverted_cdf") == D(8)
    assert nearest_rank(values, "0.07") == nearest_rank(values, 0.07) == nearest_rank(values, D("0.07")) == D(7)
    assert nearest_rank([D(v) for v in range(1, 26)], 0.28) == D(7)  # NumPy: 8


def test_the_value_is_an_element_of_the_list():
    money = [D("0.10"), D("2.500000"), D("7")]
    assert str(nearest_rank(money, "0.5")) == "2.500000"
    assert nearest_rank([], "0.5") is None


@pytest.mark.parametrize("p", ["-0.01", "1.01", 2])
def test_probabilities_outside_zero_to_one_are_refused(p):
    with pytest.raises(ValueError, match="a number from 0 to 1"):
        nearest_rank([D(1)], p)


def test_spark_takes_the_same_rank(spark):
    """``rank_sql``, the rank a Spark query selects, is ``nearest_rank``'s for every count."""
    probabilities = ("0", "0.07", "0.28", "0.5", "0.99", "0.999", "1")
    rows = (
        spark.range(1, 41)
        .selectExpr("id", *[f"{rank_sql('id', p)} AS r{i}" for i, p in enumerate(probabilities)])
        .collect()
    )
    for row in rows:
        ranked = list(range(1, row["id"] + 1))  # rank r holds value r
        assert [row[f"r{i}"] for i in range(len(probabilities))] == [nearest_rank(ranked, p) for p in probabilities], (
            row["id"]
        )

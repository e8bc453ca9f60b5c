"""Exact money as integer micro-units, for running sums that Arrow has no kernel for.

Amounts are ``DECIMAL(20, 6)`` and totals ``DECIMAL(38, 6)`` (``shared.aggregation``). Arrow sums
decimals exactly in a group-by, but has no cumulative sum and no per-row arithmetic in a loop.
Here a decimal column becomes its integer count of millionths (``to_micros``): an int64 array
when every value fits, else Python integers, which never overflow; ``from_micros`` turns such
integers back into ``DECIMAL(38, 6)``. Nothing ever passes through a float.
"""

from __future__ import annotations

from decimal import Decimal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["MONEY_TYPE", "to_micros", "from_micros", "running_sums"]

MONEY_TYPE = pa.decimal128(38, 6)
_MILLIONTH = pa.scalar(Decimal("0.000001"), pa.decimal128(7, 6))
_INT64_DIGITS = pa.decimal128(19, 0)


def to_micros(amounts: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """Millionths of each amount (nulls as 0): int64 when all fit, else an object array of ints."""
    column = amounts.combine_chunks() if isinstance(amounts, pa.ChunkedArray) else amounts
    column = pc.fill_null(column.cast(MONEY_TYPE), pa.scalar(Decimal(0), MONEY_TYPE))
    if not len(column):
        return np.zeros(0, dtype=np.int64)
    words = np.frombuffer(column.buffers()[1], dtype="<i8")[
        2 * column.offset : 2 * (column.offset + len(column))
    ].reshape(-1, 2)
    low, high = words[:, 0], words[:, 1]
    if np.array_equal(high, low >> 63):  # two's complement: the high word only extends the sign
        return low.copy()
    return np.array([int(value.scaleb(6)) for value in column.to_pylist()], dtype=object)


def from_micros(values: np.ndarray) -> pa.Array:
    """``DECIMAL(38, 6)`` amounts from integer millionths (int64 or Python ints)."""
    values = np.asarray(values)
    if values.dtype != object:
        exact = pc.multiply(pa.array(values, pa.int64()).cast(_INT64_DIGITS), _MILLIONTH)
        return exact.cast(MONEY_TYPE)
    return pa.array([Decimal(int(v)).scaleb(-6) for v in values], MONEY_TYPE)


def running_sums(values: np.ndarray, groups: np.ndarray) -> np.ndarray:
    """Cumulative sums of ``values`` restarting at each new value of ``groups`` (rows grouped
    contiguously), exact: int64 while the magnitudes allow it, Python integers otherwise."""
    values = np.asarray(values)
    if not len(values):
        return values
    starts = np.flatnonzero(np.concatenate([[True], groups[1:] != groups[:-1]]))
    if values.dtype != object and np.abs(values).max(initial=0) < (1 << 62) // max(len(values), 1):
        total = np.cumsum(values)
        offset = np.repeat(
            np.concatenate([[0], total[starts[1:] - 1]]), np.diff(np.concatenate([starts, [len(values)]]))
        )
        return total - offset
    out = np.empty(len(values), dtype=object)
    bounds = list(starts) + [len(values)]
    for first, stop in zip(bounds[:-1], bounds[1:]):
        running = 0
        for row in range(first, stop):
            running += int(values[row])
            out[row] = running
    return out

"""A lake table's size and rows as delta-rs reads them, without Spark: what ``lklab tables`` and
``lklab show`` print.

``table_size`` is a table's latest Delta version and row count, from the commit log and the
Parquet footers (no row is read). ``table_rows`` reads the rows matching a predicate, at most
``limit`` of them, and how many match in all. The predicate is a SQL boolean expression over
the table's columns (``reject_reason = 'not_json'``, ``segment > 3 AND raw_line LIKE '%abc%'``),
evaluated by the DataFusion engine inside delta-rs (``deltalake.QueryBuilder``); NULL compares
as in SQL (``column = 'x'`` is not true for a null ``column``: ask ``column IS NULL``).

Rows come in the order of the log where the table says it: sorted by whichever of
``ORDER_COLUMNS`` the table has (a micro-batch, a window, a line's segment and number), in that
order; a table with none of them comes as its files hold it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

__all__ = ["TableSize", "TableRows", "BadPredicate", "NotWritten", "ORDER_COLUMNS", "table_size", "table_rows"]

ORDER_COLUMNS = ("batch_id", "window_start", "segment", "line_number")


class BadPredicate(ValueError):
    """A ``where`` the table cannot evaluate (a column it does not have, a syntax error)."""


class NotWritten(FileNotFoundError):
    """No Delta table where the table would be: nothing has written it yet."""


@dataclass(frozen=True)
class TableSize:
    """A written table's latest ``version`` (the first commit is 0) and its ``rows`` there."""

    version: int
    rows: int


@dataclass(frozen=True)
class TableRows:
    """Rows of one table at ``version``: the first ``rows`` of the ``matched`` rows satisfying
    ``where`` (None: every row)."""

    path: str
    version: int
    where: str | None
    matched: int
    rows: pa.Table


def table_size(path: str | Path) -> TableSize | None:
    """``path``'s Delta version and row count (None: no Delta table there)."""
    from deltalake import DeltaTable

    if not DeltaTable.is_deltatable(str(path)):
        return None
    table = DeltaTable(str(path))
    return TableSize(table.version(), table.to_pyarrow_dataset().count_rows())


def _quoted(column: str) -> str:
    return '"' + column.replace('"', '""') + '"'


def table_rows(path: str | Path, *, where: str | None = None, limit: int | None = 20) -> TableRows:
    """The rows of the Delta table at ``path`` satisfying ``where`` (the module docstring), at most
    ``limit`` of them (None: all), and how many match. Raises ``NotWritten`` when there is no
    table at ``path``, ``BadPredicate`` when ``where`` cannot be evaluated on it."""
    from deltalake import DeltaTable, QueryBuilder
    from deltalake.exceptions import DeltaError

    if limit is not None and limit < 0:
        raise ValueError(f"limit {limit}: use 0 or more")
    if not DeltaTable.is_deltatable(str(path)):
        raise NotWritten(f"no Delta table at {path}: it has not been written yet")
    table = DeltaTable(str(path))
    columns = table.schema().to_arrow().names
    order = [_quoted(column) for column in ORDER_COLUMNS if column in columns]
    # The predicate is parenthesised so that it can only filter: no clause of its own follows it.
    condition = f" WHERE ({where})" if where and where.strip() else ""
    query = QueryBuilder().register("t", table)
    try:
        matched = pa.table(query.execute(f"SELECT count(*) AS n FROM t{condition}"))["n"][0].as_py()
        chosen = query.execute(
            f"SELECT * FROM t{condition}"
            + (f" ORDER BY {', '.join(order)}" if order else "")
            + ("" if limit is None else f" LIMIT {limit}")
        )
        rows = pa.table(chosen)
    except DeltaError as err:
        raise BadPredicate(f"--where {where!r}: {err}") from None
    return TableRows(str(path), table.version(), where or None, matched, rows)

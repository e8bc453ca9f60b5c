"""``lklab show TABLE``: the rows of one of a pipeline's tables, read with delta-rs (no Spark).

``TABLE`` is a name ``lklab tables`` lists (a role such as ``dead_letters`` for a declared
pipeline, a table name for the others) or the table's own name; ``--where`` filters with a SQL
predicate over its columns and ``--limit`` caps the rows printed (``lklab.table_rows``). Text is
an aligned table whose wide values are cut with ``…`` and whose control characters are escaped
(a raw line stays on one line), then a line saying how many rows matched; ``--json`` and
``--csv`` print every value whole (the CSV's count line goes to stderr, so that stdout stays a
CSV file).
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from datetime import date, datetime
from decimal import Decimal

from lklab.cli.console import UsageError
from lklab.cli.tables import table_paths

__all__ = ["cmd_show", "render_text", "render_json", "render_csv", "CELL_WIDTH"]

CELL_WIDTH = 48  # characters of a value the text table shows before cutting it with …
_ESCAPES = str.maketrans({"\n": "\\n", "\r": "\\r", "\t": "\\t"})


def _plain(value):
    """A value as JSON holds it: times in ISO 8601, exact decimals as strings, maps as objects."""
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, bytes):
        return value.decode("utf-8", "backslashreplace")
    if isinstance(value, list) and all(isinstance(item, tuple) and len(item) == 2 for item in value) and value:
        return {str(key): _plain(item) for key, item in value}
    if isinstance(value, list):
        return [_plain(item) for item in value]
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    return value


def _cell(value) -> str:
    plain = _plain(value)
    if plain is None:
        return "null"
    text = plain if isinstance(plain, str) else json.dumps(plain) if isinstance(plain, dict | list) else str(plain)
    text = text.translate(_ESCAPES)
    return text if len(text) <= CELL_WIDTH else text[: CELL_WIDTH - 1] + "…"


def _count_line(name: str, shown) -> str:
    where = f" where {shown.where}" if shown.where else ""
    if shown.rows.num_rows < shown.matched:
        return f"{shown.rows.num_rows:,} of {shown.matched:,} rows of {name}{where} (version {shown.version}; --limit shows more)"
    return f"{shown.matched:,} rows of {name}{where} (version {shown.version})"


def render_text(name: str, shown) -> str:
    """An aligned table of ``shown.rows`` (``lklab.table_rows.TableRows``), then the count line."""
    columns = shown.rows.column_names
    cells = [[_cell(value) for value in row.values()] for row in shown.rows.to_pylist()]
    widths = [max([len(column), *(len(row[i]) for row in cells)]) for i, column in enumerate(columns)]
    lines = ["  ".join(column.ljust(width) for column, width in zip(columns, widths)).rstrip()]
    lines.append("  ".join("-" * width for width in widths))
    lines += ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in cells]
    return "\n".join([*lines, _count_line(name, shown)])


def render_json(name: str, shown) -> str:
    """``{"table", "path", "version", "where", "matched", "rows": [...]}``, every value whole."""
    rows = [{key: _plain(value) for key, value in row.items()} for row in shown.rows.to_pylist()]
    document = {
        "table": name,
        "path": shown.path,
        "version": shown.version,
        "where": shown.where,
        "matched": shown.matched,
        "rows": rows,
    }
    return json.dumps(document, indent=2, default=str)


def render_csv(name: str, shown, out) -> None:
    """A header, then one line per row (a null is empty, a map or a list is JSON)."""
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(shown.rows.column_names)
    for row in shown.rows.to_pylist():
        plain = [_plain(value) for value in row.values()]
        writer.writerow(["" if v is None else json.dumps(v) if isinstance(v, dict | list) else v for v in plain])


def cmd_show(args: argparse.Namespace) -> int:
    from lklab.table_rows import BadPredicate, NotWritten, table_rows

    if args.limit < 0:
        raise UsageError(f"--limit {args.limit}: use 0 (every row) or more")
    listing = table_paths(args)
    name = listing.listed_as.get(args.table, args.table)
    if name not in listing.paths:
        raise UsageError(
            f"no table {args.table!r} in the {listing.pipeline} pipeline: use one of {', '.join(listing.paths)}"
        )
    try:
        shown = table_rows(listing.paths[name], where=args.where, limit=args.limit or None)
    except (NotWritten, BadPredicate) as err:
        raise UsageError(f"{name}: {err}") from None
    if args.json:
        print(render_json(name, shown))
    elif args.csv:
        render_csv(name, shown, sys.stdout)
        print(_count_line(name, shown), file=sys.stderr)
    else:
        print(render_text(name, shown))
    return 0

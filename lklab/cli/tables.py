"""``lklab tables``: a pipeline's tables, where each is in the lake, its rows and its Delta version.

A pipeline that declares its tables by role (``Pipeline.tables``: ``truth``, ``stream``,
``late``, ``duplicates``, ``dead_letters`` ...) is listed by role; any other by table name, its
stream's layout then its batch's tables (``DagSpec.batch_tables``). A path is where the table is
or will be (``<lake>/tables/NAME``); a written table has its row count and latest Delta version
(``lklab.table_rows.table_size``), one not written yet says so. ``--json`` prints where each
is (role -> path); with ``--sizes``, role -> ``{path, written, rows, version}``. With ``--against kappa:RUN`` the
stream's tables are the replay ``RUN``'s (``<lake>/tables/kappa/RUN/NAME``) and the batch's stay
where they are. ``lklab show`` (``lklab.cli.show``) prints a table's rows by the same names.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path

from lklab.cli.console import UsageError
from lklab.cli.options import config_from

__all__ = ["cmd_tables", "tables_by_role", "PipelineTables", "table_paths"]


def tables_by_role(pipeline) -> dict:
    """``pipeline``'s tables by role, else by name (the module docstring)."""
    if pipeline.tables is not None:
        return dict(pipeline.tables())
    rule = pipeline.stream()
    found = [entry.table for entry in rule.layout] if rule is not None else []
    found += list(pipeline.dags.batch_tables) if pipeline.dags is not None else []
    return {table.name: table for table in found}


@dataclass(frozen=True)
class PipelineTables:
    """Where each of ``pipeline``'s tables is, by the name ``lklab tables`` lists it under
    (``paths``), and those names by the table's own name where the two differ (``listed_as``: a
    declared pipeline's ``NAME_dead_letter`` is listed as ``dead_letters``)."""

    pipeline: str
    paths: dict[str, Path]
    listed_as: dict[str, str]


def table_paths(args: argparse.Namespace) -> PipelineTables:
    """The selected pipeline's tables (``--pipeline``, ``--lake``, ``--against``)."""
    from lklab.cli.pipelines import selected_pipeline
    from shared.catalog import StreamChoiceError, stream_prefix, tables_root

    pipeline = selected_pipeline(args)
    root = tables_root(config_from(args).lake)
    try:
        prefix = stream_prefix(args.against)
    except (StreamChoiceError, ValueError) as err:
        raise UsageError(str(err)) from None
    rule = pipeline.stream()
    streamed = {entry.table.name for entry in rule.layout} if rule is not None else set()
    listed = tables_by_role(pipeline)
    paths = {
        role: root / (table.at(prefix) if table.name in streamed else table.name) for role, table in listed.items()
    }
    return PipelineTables(
        pipeline.name, paths, {table.name: role for role, table in listed.items() if table.name != role}
    )


def cmd_tables(args: argparse.Namespace) -> int:
    from lklab.table_rows import table_size

    paths = table_paths(args).paths
    sizes = {role: table_size(path) for role, path in paths.items()}
    if args.json and not args.sizes:  # where each table is: the listing a script reads
        print(json.dumps({role: str(path) for role, path in paths.items()}, indent=2))
        return 0
    if args.json:
        listing = {
            role: {
                "path": str(path),
                "written": sizes[role] is not None,
                "rows": None if sizes[role] is None else sizes[role].rows,
                "version": None if sizes[role] is None else sizes[role].version,
            }
            for role, path in paths.items()
        }
        print(json.dumps(listing, indent=2))
        return 0
    described = {
        role: "not written yet" if size is None else f"{size.rows:,} rows, version {size.version}"
        for role, size in sizes.items()
    }
    name_width = max(map(len, paths), default=0)
    size_width = max(map(len, described.values()), default=0)
    for role, path in paths.items():
        print(f"{role:<{name_width}}  {described[role]:<{size_width}}  {path}")
    return 0

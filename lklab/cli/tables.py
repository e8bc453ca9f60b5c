"""``lklab tables``: where each of a pipeline's tables is in the lake.

A pipeline that declares its tables by role (``Pipeline.tables``: ``truth``, ``stream``,
``late``, ``duplicates``, ``dead_letters`` ...) is listed by role; any other by table name, its
stream's layout then its batch's tables (``DagSpec.batch_tables``). A path is where the table is
or will be (``<lake>/tables/NAME``); ``exists`` says whether it has been written. With
``--against kappa:RUN`` the stream's tables are the replay ``RUN``'s (``<lake>/tables/kappa/RUN/NAME``)
and the batch's stay where they are.
"""

from __future__ import annotations

import argparse
import json

from lklab.cli.console import UsageError
from lklab.cli.options import config_from

__all__ = ["cmd_tables", "tables_by_role"]


def tables_by_role(pipeline) -> dict:
    """``pipeline``'s tables by role, else by name (the module docstring)."""
    if pipeline.tables is not None:
        return dict(pipeline.tables())
    rule = pipeline.stream()
    found = [entry.table for entry in rule.layout] if rule is not None else []
    found += list(pipeline.dags.batch_tables) if pipeline.dags is not None else []
    return {table.name: table for table in found}


def cmd_tables(args: argparse.Namespace) -> int:
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
    paths = {
        role: root / (table.at(prefix) if table.name in streamed else table.name)
        for role, table in tables_by_role(pipeline).items()
    }
    if args.json:
        print(json.dumps({role: str(path) for role, path in paths.items()}, indent=2))
    else:
        width = max(map(len, paths), default=0)
        for role, path in paths.items():
            print(f"{role:<{width}}  {path}{'' if path.exists() else '  (not written yet)'}")
    return 0

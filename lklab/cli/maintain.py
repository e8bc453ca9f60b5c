"""``lklab maintain``: compaction and VACUUM of the always-on tables: every registered
pipeline's, every pipeline the configuration file declares, and the reconciliations' history."""

from __future__ import annotations

import argparse

from lklab.cli.console import UsageError
from lklab.cli.options import config_from


def cmd_maintain(args: argparse.Namespace) -> int:
    import json

    from lklab.maintenance import configured_tables, maintain_lake

    config = config_from(args)
    try:
        done = maintain_lake(config.lake, args.retention, tables=configured_tables(args.config))
    except ValueError as err:
        raise UsageError(str(err)) from None
    print(json.dumps(done.as_dict(), indent=2) if args.json else done.describe())
    return 0

"""``lklab maintain``: compaction and VACUUM of the always-on tables."""

from __future__ import annotations

import argparse

from lklab.cli.console import UsageError
from lklab.cli.options import config_from


def cmd_maintain(args: argparse.Namespace) -> int:
    import json

    from lklab.maintenance import maintain_lake

    config = config_from(args)
    try:
        done = maintain_lake(config.lake, args.retention)
    except ValueError as err:
        raise UsageError(str(err)) from None
    print(json.dumps(done.as_dict(), indent=2) if args.json else done.describe())
    return 0

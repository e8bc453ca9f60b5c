"""``lklab health``: is the speed layer keeping up."""

from __future__ import annotations

import argparse

from lklab.cli.console import UNHEALTHY, UsageError
from lklab.cli.options import config_from


def cmd_health(args: argparse.Namespace) -> int:
    import json

    from lklab.health import stream_health

    config = config_from(args)
    try:
        health = stream_health(config.lake, max_staleness=args.max_staleness, max_watermark_lag=args.max_watermark_lag)
    except ValueError as err:
        raise UsageError(str(err)) from None
    print(json.dumps(health.as_dict(), indent=2) if args.json else health.describe())
    return 0 if health.healthy else UNHEALTHY

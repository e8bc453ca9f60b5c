"""``lklab health``: is a pipeline's live stream keeping up (``--pipeline``; the default: billing's speed layer)."""

from __future__ import annotations

import argparse

from lklab.cli.console import UNHEALTHY, UsageError
from lklab.cli.options import config_from


def cmd_health(args: argparse.Namespace) -> int:
    import json

    from lklab.cli.pipelines import selected_pipeline
    from lklab.health import stream_health

    pipeline = selected_pipeline(args)
    rule = pipeline.stream()
    if rule is None or rule.metrics is None:
        raise UsageError(f"the {pipeline.name} pipeline has no live stream to check")
    config = config_from(args)
    try:
        health = stream_health(
            config.lake,
            max_staleness=args.max_staleness,
            max_watermark_lag=args.max_watermark_lag,
            table=rule.metrics.name,
            state=rule.layout[-1].table.name,
            what=rule.what,
            max_latency=args.max_latency,
            latency_window=args.latency_window,
        )
    except ValueError as err:
        raise UsageError(str(err)) from None
    print(json.dumps(health.as_dict(), indent=2) if args.json else health.describe())
    return 0 if health.healthy else UNHEALTHY

"""``lklab reconcile``: the stream against the batch truth; exit 3 on an unexplained gap."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from lklab.cli.console import UNHEALTHY, UsageError, command_session, progress
from lklab.cli.options import adopt_stream, config_from, days_from
from shared import catalog


def cmd_reconcile(args: argparse.Namespace) -> int:
    from reconciliation.reconcile import ReconcileInputError, reconcile, stream_prefix
    from reconciliation.render import render_json, render_text
    from reconciliation.tolerance import Tolerance, parse_tolerance
    from shared.batch_runs import PositionError
    from shared.table_settings import SettingsConflict

    config = config_from(args)
    days = days_from(args)
    try:
        prefix = stream_prefix(args.against)
        tolerance = Tolerance(parse_tolerance(args.abs_tol, "abs-tol"), parse_tolerance(args.rel_tol, "rel-tol"))
        max_money = parse_tolerance(args.max_unexplained, "max-unexplained")
    except ValueError as err:
        raise UsageError(str(err)) from None
    config = adopt_stream(config, prefix, f"replay {catalog.replay_name(prefix)}" if prefix else "the speed layer")
    if args.max_unexplained_events < 0:
        raise UsageError(f"--max-unexplained-events must be >= 0, got {args.max_unexplained_events}")
    progress(f"starting Spark ({config.spark_master})")
    spark, stop_spark = command_session(config, "lklab-reconcile")
    progress(
        f"reconciling {args.against} against {catalog.BATCH_TRUTH.name} for {days.describe()}: diff, attribution, side-output fold"
    )
    try:
        result = reconcile(spark, config, days, against=args.against, tolerance=tolerance)
    except (ReconcileInputError, PositionError, SettingsConflict) as err:
        raise UsageError(str(err)) from None
    finally:
        stop_spark()
    rendered = render_json(result)
    if args.json_out:
        Path(args.json_out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json_out).write_text(rendered + "\n")
    print(rendered if args.json else render_text(result))
    breaches = result.breaches(max_money, args.max_unexplained_events)
    for breach in breaches:
        print(f"lklab reconcile: UNEXPLAINED GAP: {breach}", file=sys.stderr)
    return UNHEALTHY if breaches else 0

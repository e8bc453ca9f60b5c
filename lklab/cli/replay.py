"""``lklab replay``: a Kappa replay of the whole log into tables of its own."""

from __future__ import annotations

import argparse

from lklab.cli.console import UsageError, command_session, progress
from lklab.cli.options import config_from, lake_windows


def cmd_replay(args: argparse.Namespace) -> int:
    from lklab.pipelines.billing_windows.replay import ReplayExists, run_replay, writer_role
    from shared.catalog import replay_prefix, tables_root
    from shared.locks import refuse_if_held
    from shared.table_settings import SettingsConflict

    config = lake_windows(config_from(args), "a replay is compared with them")
    try:
        replay_prefix(args.name)
    except ValueError as err:
        raise UsageError(str(err)) from None
    refuse_if_held(config.lake.resolve(), writer_role(args.name))  # before Spark starts: a running replay of that name
    settings = config.describe()
    progress(
        f"Kappa replay '{args.name}' over {config.lake / 'log'}: watermark delay {settings['watermark-delay']}, "
        f"allowed lateness {settings['allowed-lateness']}"
    )
    spark, stop_spark = command_session(config, f"lklab-replay-{args.name}")
    try:
        run = run_replay(spark, config, args.name, replace=args.replace, history=args.history)
    except (ReplayExists, SettingsConflict) as err:
        raise UsageError(str(err)) from None
    finally:
        stop_spark()
    print(
        f"replay {run.name}: {run.lines:,} lines over {run.segments:,} segments; "
        f"{run.wall_seconds:.1f} s wall, {run.cpu_seconds:.1f} CPU seconds ({run.cost_scope}); "
        f"tables under {tables_root(config.lake) / replay_prefix(run.name)}"
    )
    return 0

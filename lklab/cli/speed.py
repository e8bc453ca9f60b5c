"""``lklab speed``: the always-on speed layer (or one pass over the log with ``--available-now``)."""

from __future__ import annotations

import argparse

from lklab.cli.console import UsageError, command_session, machine_records, progress
from lklab.cli.options import config_from
from shared import catalog


def cmd_speed(args: argparse.Namespace) -> int:
    import signal
    import threading

    from lklab.pipelines.billing_windows.speed import run_speed

    config = config_from(args)
    if args.segments_per_batch < 1:
        raise UsageError(f"--segments-per-batch must be at least 1, got {args.segments_per_batch}")
    machine_records("lklab.speed")
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    progress(
        f"speed layer on {config.lake / 'log'}: {config.window.describe()} windows, "
        f"watermark delay {config.describe()['watermark-delay']}, allowed lateness {config.describe()['allowed-lateness']}"
    )
    spark, stop_spark = command_session(config, "lklab-speed")
    try:
        layer = run_speed(
            spark, config, available_now=args.available_now, segments_per_batch=args.segments_per_batch, stop=stop
        )
        name = layer.table(catalog.STREAM_METRICS)
        metrics = layer.tables.read_arrow(name) if layer.tables.exists(name) else None
    finally:
        # Stopping Spark shuts down the foreachBatch callback server before the interpreter exits.
        stop_spark()
    if metrics is not None and metrics.num_rows:
        totals = {
            c: sum(metrics[c].to_pylist()) for c in ("input_lines", "on_time", "late", "duplicates", "dead_letters")
        }
        print(
            f"{metrics.num_rows} micro-batches: {totals['input_lines']:,} lines = {totals['on_time']:,} on time + "
            f"{totals['late']:,} late (side output) + {totals['duplicates']:,} duplicates + "
            f"{totals['dead_letters']:,} dead letters"
        )
    return 0

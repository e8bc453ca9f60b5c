"""``lklab batch``: the batch recompute, its summary, and the generator's ground truth when there is one."""

from __future__ import annotations

import argparse

from lklab.cli.console import FAILURE, UsageError, command_session, progress
from lklab.cli.options import config_from, days_from
from shared.config import LabConfig


def _run_batch(config: LabConfig, days=None, refresh: bool = False) -> int:
    from lklab.pipelines.billing_windows.batch import run_batch
    from lklab.pipelines.billing_windows.generator import load_events
    from lklab.pipelines.billing_windows.summary import batch_summary, render_text
    from lklab.pipelines.billing_windows.truth import events_digest, truth_written_for, write_truth
    from shared.batch_runs import PositionError
    from shared.partitions import DayRange
    from shared.table_settings import SettingsConflict
    from shared.tables import Tables

    progress(f"starting Spark ({config.spark_master})")
    spark, stop_spark = command_session(config, "lklab-batch")
    progress("batch recompute: parse, validate, dedup, window, aggregate")
    try:
        try:
            run = run_batch(spark, config, days or DayRange(), refresh=refresh)
        except (PositionError, SettingsConflict) as err:
            raise UsageError(str(err)) from None
        digest = events_digest(config.lake)
        if digest is not None and truth_written_for(config.window, config.lake, digest):
            progress(f"ground truth for {config.window.describe()} windows: already written for these generated events")
        elif digest is not None:
            progress(f"ground truth for {config.window.describe()} windows, computed without Spark")
            write_truth(load_events(config.lake), config.window, config.lake, digest)
        summary = batch_summary(Tables(spark, config.lake, config.table_engine), run, config.window)
    finally:
        stop_spark()
    print(render_text(summary))
    return 0 if run.conserved and summary.matches_generator_truth is not False else FAILURE


def cmd_batch(args: argparse.Namespace) -> int:
    return _run_batch(config_from(args), days_from(args), args.refresh)

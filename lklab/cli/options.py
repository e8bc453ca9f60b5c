"""From parsed arguments to a configuration: settings, days, and the windows the lake's tables were built with."""

from __future__ import annotations

import argparse

from lklab.cli.console import UsageError
from shared import catalog
from shared.config import SETTINGS, ConfigError, LabConfig, load_config

DEFAULT_DELAYS, DEFAULT_LATENESS = "30s,5m", "0,30m"


def config_from(args: argparse.Namespace) -> LabConfig:
    flags = {key: getattr(args, key.replace("-", "_"), None) for key in SETTINGS}
    try:
        return load_config(args.config, flags)
    except ConfigError as err:
        raise UsageError(str(err)) from None


def generate_request(args: argparse.Namespace):
    """``lklab generate``'s options, read once (``GenerateRequest``: durations parsed; a bad value
    is a ``UsageError``)."""
    from lklab.pipelines.contract import GenerateRequest
    from shared.durations import parse_duration

    try:
        return GenerateRequest(
            scenario=getattr(args, "scenario", None),
            events=args.events,
            seed=args.seed,
            span=parse_duration(args.span, name="span"),
            accounts=args.accounts,
            duplicate_rate=args.duplicate_rate,
            malformed_rate=args.malformed_rate,
            segment_interval=parse_duration(args.segment_interval, name="segment-interval"),
            overwrite=args.overwrite,
        )
    except ValueError as err:
        raise UsageError(str(err)) from None


def days_from(args: argparse.Namespace):
    from shared.partitions import DayRange

    try:
        return DayRange.of(
            getattr(args, "date", None), getattr(args, "date_from", None), getattr(args, "date_to", None)
        )
    except ValueError as err:
        raise UsageError(str(err)) from None


def lake_windows(config: LabConfig, purpose: str) -> LabConfig:
    """``config`` with the windows and line settings the lake's batch truth and speed layer were
    built with, where the user gave none (both must agree; a contradicting flag is refused)."""
    from shared.table_settings import LINE_KEYS, SettingsConflict, adopt, agreed

    tables = settings_tables(config)
    try:
        windows = agreed(
            tables,
            [catalog.BATCH_TRUTH.name, catalog.SPEED_AGGREGATES.name],
            ("window-kind", "window-size", "window-slide", "session-gap", *LINE_KEYS),
        )
        return adopt(config, windows, f"the lake's tables ({purpose})")
    except SettingsConflict as err:
        raise UsageError(str(err)) from None


def settings_tables(config: LabConfig):
    """The lake's tables, for reading what they recorded (no Spark needed)."""
    from shared.tables import Tables

    return Tables(None, config.lake, "deltalake")


def adopt_stream(config: LabConfig, prefix: str, source: str) -> LabConfig:
    """``config`` with the settings a stream's tables and the batch truth recorded."""
    from shared.table_settings import LINE_KEYS, SettingsConflict, adopt, agreed

    tables = settings_tables(config)
    try:
        windows = agreed(
            tables,
            [catalog.BATCH_TRUTH.name, catalog.SPEED_AGGREGATES.at(prefix)],
            ("window-kind", "window-size", "window-slide", "session-gap", *LINE_KEYS),
        )
        stream = agreed(tables, [catalog.SPEED_AGGREGATES.at(prefix)])
        return adopt(config, {**stream, **windows}, source)
    except SettingsConflict as err:
        raise UsageError(str(err)) from None

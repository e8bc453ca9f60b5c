"""From parsed arguments to a configuration, a generate request and days (what every pipeline's commands read alike)."""

from __future__ import annotations

import argparse

from lklab.cli.console import UsageError
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

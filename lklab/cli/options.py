"""From parsed arguments to a configuration, a generate request and days (what every pipeline's commands read alike).

**The lake** is checked here, once, for every command that takes ``--lake`` (each reads its
configuration through ``config_from``): a path that is a file is refused whatever the command;
one that does not exist is refused by a command that reads a lake (a typo would otherwise show
as an empty lake, an unhealthy stream or a new lake beside the real one) and left to a command
that writes one where there is none (``CREATES_LAKE``, ``compare --scenario``, ``reconcile``
of two tables). Both are bad usage, exit 2, naming the path and what a lake is."""

from __future__ import annotations

import argparse
from decimal import Decimal, InvalidOperation
from pathlib import Path

from lklab.cli.console import UsageError
from shared.config import SETTINGS, ConfigError, LabConfig, load_config

DEFAULT_DELAYS, DEFAULT_LATENESS = "30s,5m", "0,30m"
# The commands that write a lake where there is none; the others read one.
CREATES_LAKE = ("generate", "ingest", "demo")
_LAKE = (
    "a lake is the folder holding the lab's event log (log/) and tables (tables/), named by --lake, "
    "LKLAB_LAKE or the configuration file's lake (default ./lake)"
)


def config_from(args: argparse.Namespace) -> LabConfig:
    """The configuration ``args`` give (flags over environment over file), its lake checked for ``args.command``."""
    flags = {key: getattr(args, key.replace("-", "_"), None) for key in SETTINGS}
    try:
        config = load_config(args.config, flags)
    except ConfigError as err:
        raise UsageError(str(err)) from None
    check_lake(args, config.lake)
    return config


def _creates_lake(args: argparse.Namespace) -> bool:
    if args.command == "compare":
        return getattr(args, "scenario", None) is not None  # it writes the scenario's log first
    if args.command == "reconcile":
        from lklab.cli.table_reconcile import compares_tables

        return compares_tables(args)  # two tables of any lake: its run is recorded in this one
    return args.command in CREATES_LAKE


def check_lake(args: argparse.Namespace, lake: Path) -> None:
    """``UsageError`` for a lake that is a file, or that does not exist for a command that reads one."""
    where = lake.expanduser().resolve()
    if where.exists() and not where.is_dir():
        raise UsageError(f"lake {where}: not a directory; {_LAKE}")
    if not where.exists() and not _creates_lake(args):
        raise UsageError(
            f"lake {where}: no such directory; {_LAKE}; 'lklab generate' or 'lklab ingest FILE...' writes one "
            "(an always-on 'lklab speed' may start on an empty folder)"
        )


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


def target_completeness(text: str) -> Decimal:
    """``--target-completeness`` (``advise``, ``compare``): ``99.5%`` or ``0.995`` as a fraction in
    (0, 1]; ``UsageError`` naming the valid forms."""
    written = str(text).strip()
    try:
        value = Decimal(written[:-1]) / 100 if written.endswith("%") else Decimal(written)
    except InvalidOperation:
        value = None
    if value is None or not 0 < value <= 1:
        raise UsageError(f"--target-completeness {text!r}: a percentage such as 99.5% or a fraction such as 0.995")
    return value

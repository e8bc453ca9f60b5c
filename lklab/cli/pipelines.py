"""Which pipeline a command runs: ``--pipeline`` (or the setting ``pipeline`` in a file or the
environment). ``billing_windows`` is the lab's first pipeline and runs through the commands'
own handlers; another pipeline's commands are in its own module, ``PIPELINE_COMMANDS[name]``,
which maps a command to its handler (``COMMANDS``)."""

from __future__ import annotations

import argparse
import importlib
from typing import Callable

from lklab.cli.console import UsageError
from shared.config import ConfigError, load_config

__all__ = ["pipeline_handler", "PIPELINE_COMMANDS"]

# The commands whose work depends on the pipeline (ingest, health and maintenance do not).
PER_PIPELINE = ("generate", "speed", "batch", "replay", "reconcile", "compare")
PIPELINE_COMMANDS = {"unique_visitors": "lklab.cli.visitors", "order_payments": "lklab.cli.payments"}


def pipeline_handler(args: argparse.Namespace) -> Callable[[argparse.Namespace], int] | None:
    """The handler of ``args.command`` for the pipeline configured (None: ``billing_windows``)."""
    if args.command not in PER_PIPELINE:
        return None
    try:  # only the pipeline: the command validates its other settings itself (compare sweeps lists)
        pipeline = load_config(args.config, {"pipeline": getattr(args, "pipeline", None)}).pipeline
    except ConfigError as err:
        raise UsageError(str(err)) from None
    if pipeline not in PIPELINE_COMMANDS:
        return None
    commands = importlib.import_module(PIPELINE_COMMANDS[pipeline]).COMMANDS
    if args.command not in commands:
        raise UsageError(f"{pipeline} has no '{args.command}' command; it has: {', '.join(sorted(commands))}")
    return commands[args.command]

"""``lklab``: the command line of the Lambda-Kappa Lab.

Exit codes: 0 success, 2 bad usage or bad input (the message names the bad value and the valid
ones), 1 a failure while running (one line; ``LKLAB_DEBUG=1`` shows the traceback), 3 the run
worked and found a problem (an unhealthy speed layer, an unexplained reconciliation gap).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from typing import NoReturn

from lklab.cli.console import FAILURE, USAGE, UsageError
from lklab.cli.flag_help import help_pipeline
from lklab.cli.parser import build_parser
from lklab.cli.pipelines import pipeline_handler
from lklab.progress import configure_logging

__all__ = ["main", "parse", "run"]


def parse(argv: list[str]) -> argparse.Namespace:
    """``lklab ARGV``'s arguments, with the flags of the pipeline it names (``SystemExit`` on bad
    usage, after argparse has said why on stderr)."""
    return build_parser(help_pipeline(argv)).parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    configure_logging()
    try:
        args = parse(sys.argv[1:] if argv is None else argv)
    except SystemExit as exit_:
        return int(exit_.code or 0)
    from shared.locks import LockHeld
    from shared.table_settings import SettingsConflict

    try:
        # A pipeline's command runs its pipeline's job (lklab.cli.pipeline_jobs); the others their own handler.
        handler: Callable[[argparse.Namespace], int] = pipeline_handler(args) or args.handler
        return handler(args)
    except (UsageError, LockHeld, SettingsConflict) as err:
        print(f"lklab {args.command}: {err}", file=sys.stderr)
        return USAGE
    except KeyboardInterrupt:
        print(f"lklab {args.command}: interrupted", file=sys.stderr)
        return FAILURE
    except Exception as err:  # a failure while running: one clear line, details on request
        print(f"lklab {args.command}: failed: {type(err).__name__}: {err}", file=sys.stderr)
        if os.environ.get("LKLAB_DEBUG"):
            raise
        return FAILURE


def run(argv: list[str] | None = None) -> NoReturn:
    """The ``lklab`` process: :func:`main`, then :func:`~lklab.cli.process_exit.exit_process` with its code."""
    from lklab.cli.process_exit import exit_process

    exit_process(main(argv))


if __name__ == "__main__":
    run()

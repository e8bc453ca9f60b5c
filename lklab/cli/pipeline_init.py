"""``lklab init --pipeline NAME --sample FILE [--config OUT]``: a declaration drafted from a sample.

Reads the first ``--lines`` lines of a JSON-lines sample and proposes a ``[pipelines.NAME]``
section (``lklab.pipelines.declared.proposal``): printed on stdout, or written to ``--config``,
a file that must not exist yet (the proposal is never merged into a file, nor overwrites one).
The proposal is loaded back through the declaration's own validation before it is shown, so
what it proposes is a declaration the lab accepts. A sample it cannot guess from (no id, no
event time, no key) is exit 2 with what to write by hand. No Spark starts.
"""

from __future__ import annotations

import argparse
import sys
import tomllib
from itertools import islice
from pathlib import Path

from lklab.cli.console import UsageError
from lklab.pipelines.declared.declaration import declarations
from lklab.pipelines.declared.proposal import propose

__all__ = ["cmd_init"]


def cmd_init(args: argparse.Namespace) -> int:
    sample = Path(args.sample)
    if args.lines < 1:
        raise UsageError(f"--lines: {args.lines} is not valid; valid: a whole number, at least 1")
    if args.config is not None and Path(args.config).exists():
        raise UsageError(f"--config: {args.config} exists; the proposal is written only to a new file")
    try:
        with sample.open("rb") as handle:
            lines = [line.rstrip(b"\r\n") for line in islice(handle, args.lines)]
        proposal = propose(args.pipeline, lines, sample.name)
    except FileNotFoundError:
        raise UsageError(f"--sample: {sample} does not exist") from None
    except ValueError as err:
        raise UsageError(str(err)) from None
    declarations(tomllib.loads(proposal))  # a ConfigError here is the proposal's bug, not the user's
    if args.config is None:
        sys.stdout.write(proposal)
        return 0
    with Path(args.config).open("x", encoding="utf-8") as handle:
        handle.write(proposal)
    print(f"wrote the proposed [pipelines.{args.pipeline}] to {args.config}: check every guess before using it")
    return 0

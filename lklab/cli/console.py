"""Console output and exit codes of the ``lklab`` commands."""

from __future__ import annotations

import sys
import time

USAGE, FAILURE, UNHEALTHY = 2, 1, 3


class UsageError(Exception):
    """Bad input from the user: reported in one line, exit code 2."""


def progress(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)

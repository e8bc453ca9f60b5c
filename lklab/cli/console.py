"""Console output and exit codes of the ``lklab`` commands."""

from __future__ import annotations

import logging

USAGE, FAILURE, UNHEALTHY = 2, 1, 3


class UsageError(Exception):
    """Bad input from the user: reported in one line, exit code 2."""


log = logging.getLogger("lklab")


def progress(message: str) -> None:
    """A message about the work under way: a ``[HH:MM:SS] message`` line on stderr, through
    ``logging`` (``lklab.progress.configure_logging``, set up by ``main``)."""
    log.info(message)

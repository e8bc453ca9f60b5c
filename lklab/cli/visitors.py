"""The ``unique_visitors`` pipeline's commands (``lklab COMMAND --pipeline unique_visitors``)."""

from __future__ import annotations

import argparse
from typing import Callable

__all__ = ["COMMANDS"]

COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {}

"""The ``order_payments`` pipeline's commands (``lklab COMMAND --pipeline order_payments``)."""

from __future__ import annotations

import argparse
from typing import Callable

__all__ = ["COMMANDS"]

COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {}

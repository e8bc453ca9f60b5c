"""Durations as the command line and the configuration file write them.

A duration is a whole number followed by a unit: ``500ms``, ``10s``, ``1m``, ``2h``, ``1d``.
A bare ``0`` means zero. Internally every duration is an integer number of microseconds,
the resolution of Spark's ``TimestampType``, so window arithmetic never touches floats.
"""

from __future__ import annotations

import re

__all__ = ["UNITS", "parse_duration", "format_duration", "MICROS_PER_SECOND"]

MICROS_PER_SECOND = 1_000_000

UNITS = {
    "ms": 1_000,
    "s": MICROS_PER_SECOND,
    "m": 60 * MICROS_PER_SECOND,
    "h": 3_600 * MICROS_PER_SECOND,
    "d": 86_400 * MICROS_PER_SECOND,
}

_PATTERN = re.compile(r"^\s*(\d+)\s*(ms|s|m|h|d)?\s*$")


def parse_duration(text: str | int, *, name: str = "duration") -> int:
    """Return the duration ``text`` in microseconds.

    Raises ``ValueError`` naming the bad value and the accepted forms. A number without a unit
    is accepted only when it is zero: ``"10"`` is ambiguous (seconds? minutes?).
    """
    if isinstance(text, bool):
        raise ValueError(f"{name}: {text!r} is not a duration; use e.g. 500ms, 10s, 1m, 2h, 1d")
    if isinstance(text, int):
        if text == 0:
            return 0
        raise ValueError(f"{name}: {text!r} needs a unit; use e.g. 500ms, 10s, 1m, 2h, 1d")
    match = _PATTERN.match(str(text))
    if not match:
        raise ValueError(
            f"{name}: {text!r} is not a duration; use a whole number and one of the units "
            f"ms, s, m, h, d (e.g. 500ms, 10s, 1m, 2h, 1d)"
        )
    amount, unit = int(match.group(1)), match.group(2)
    if unit is None:
        if amount == 0:
            return 0
        raise ValueError(f"{name}: {text!r} needs a unit; use e.g. {amount}s or {amount}m")
    return amount * UNITS[unit]


def format_duration(micros: int) -> str:
    """Render microseconds in the largest unit that divides them exactly (``90s``, ``2h``)."""
    if micros == 0:
        return "0s"
    for unit in ("d", "h", "m", "s", "ms"):
        if micros % UNITS[unit] == 0:
            return f"{micros // UNITS[unit]}{unit}"
    return f"{micros}us"

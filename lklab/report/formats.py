"""How figures read on the page: exact money, percentages, seconds, counts and UTC times.

``exact`` and ``iso`` are the machine forms the JSON and CSV files use.

Formatting never rounds money: an amount shows at least its currency's minor units and every
further decimal it has (``12.50`` USD, ``1,200`` JPY, ``0.001234`` USD). Seconds show at most
three decimals, ratios a percentage with two: the precision the comparison judges them at.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

from shared.currencies import MINOR_UNITS

from .validation import SCALE

__all__ = ["money", "ratio", "seconds", "count", "utc", "value", "exact", "iso"]


def money(amount: Decimal, currency: str) -> str:
    """``1,234.50`` for ``Decimal("1234.5")`` USD; exact, with thousands separators.

    The text depends on the value only: ``Decimal("2.5")`` and ``Decimal("2.500000")`` read
    the same, so a report read back from ``summary.json`` renders identically.
    """
    places = max(MINOR_UNITS.get(currency, 2), -amount.normalize().as_tuple().exponent)
    text = f"{amount:,.{places}f}"
    return text[1:] if amount == 0 and text.startswith("-") else text


def ratio(fraction: Decimal) -> str:
    """``99.87%`` for ``Decimal("0.9987")``."""
    return f"{(fraction * 100).quantize(Decimal('0.01')):,}%"


def seconds(amount: Decimal | float) -> str:
    """``61.5 s``: at most three decimals, trailing zeros dropped."""
    text = f"{Decimal(str(amount)).quantize(Decimal('0.001')):,.3f}".rstrip("0").rstrip(".")
    return f"{text} s"


def count(number: int) -> str:
    return f"{number:,}"


def utc(moment: dt.datetime) -> str:
    """``2026-01-05T10:00:00Z``; microseconds only when there are any."""
    return moment.astimezone(dt.UTC).replace(tzinfo=None).isoformat() + "Z"


def value(figure: Decimal | int | None, unit: str) -> str:
    """A comparison value in its unit (see ``comparison.ComparisonRow.unit``); ``—`` for none."""
    if figure is None:
        return "—"
    if unit == "ratio":
        return ratio(figure)
    if unit == "s":
        return seconds(figure)
    if isinstance(figure, int):
        return count(figure)
    return money(figure, unit)


def exact(number: Decimal) -> str:
    """Machine form of an exact figure: six decimal places, no separators (``-5.000000``)."""
    return f"{number:.{SCALE}f}"


def iso(moment: dt.datetime) -> str:
    """Machine form of a time: ``2026-01-05T10:00:00.000000Z``, always with microseconds."""
    return moment.astimezone(dt.UTC).replace(tzinfo=None).isoformat(timespec="microseconds") + "Z"

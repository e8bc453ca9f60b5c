"""Checks the report's objects run on construction, so a bad figure fails where it is made.

Money and exact seconds are ``Decimal`` with at most ``SCALE`` decimal places (microseconds, and
the lake's ``DECIMAL(38,6)``); a float is refused rather than rounded. Per-currency mappings
are keyed by three-letter upper-case codes and come back sorted by currency.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping
from decimal import Decimal

__all__ = ["SCALE", "check_decimal", "check_per_currency", "check_utc", "freeze"]

SCALE = 6
_CURRENCY = re.compile(r"^[A-Z]{3}$")


def check_decimal(value: object, name: str) -> Decimal:
    """``value`` if it is a finite ``Decimal`` with at most ``SCALE`` places, else ValueError."""
    if not isinstance(value, Decimal):
        raise ValueError(f"{name}: {value!r} is a {type(value).__name__}; exact figures must be Decimal")
    if not value.is_finite():
        raise ValueError(f"{name}: {value!r} is not a finite number")
    if value.as_tuple().exponent < -SCALE:
        raise ValueError(f"{name}: {value} has more than {SCALE} decimal places")
    return value


def check_per_currency(values: Mapping[str, Decimal], name: str) -> dict[str, Decimal]:
    """A copy of ``values`` sorted by currency, after checking every code and figure."""
    if not isinstance(values, Mapping):
        raise ValueError(f"{name}: expected a mapping currency -> Decimal, got {type(values).__name__}")
    for currency, value in values.items():
        if not isinstance(currency, str) or not _CURRENCY.match(currency):
            raise ValueError(f"{name}: {currency!r} is not a currency code (three upper-case letters, e.g. USD)")
        check_decimal(value, f"{name}[{currency}]")
    return dict(sorted(values.items()))


def check_utc(value: object, name: str) -> dt.datetime:
    """``value`` if it is a timezone-aware datetime at UTC offset zero, else ValueError."""
    if not isinstance(value, dt.datetime) or value.tzinfo is None:
        raise ValueError(f"{name}: {value!r} is not a timezone-aware datetime")
    if value.utcoffset() != dt.timedelta(0):
        raise ValueError(f"{name}: {value.isoformat()} is not in UTC")
    return value


def freeze(instance: object, field: str, value: object) -> None:
    """Replace a field of a frozen dataclass during ``__post_init__`` (a normalised copy)."""
    object.__setattr__(instance, field, value)


def check_decision_inputs(target: Decimal, events_per_second: float) -> None:
    """A completeness target is a fraction in (0, 1]; a rate is events per second above zero."""
    if not isinstance(target, Decimal) or not 0 < target <= 1:
        raise ValueError(f"target completeness {target!r}: a fraction above 0 and at most 1, e.g. 0.995")
    if not events_per_second > 0:
        raise ValueError(f"events per second {events_per_second!r}: a rate above zero, e.g. 1000")

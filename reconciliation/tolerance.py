"""When two window totals count as equal.

A stream amount ``s`` matches the truth amount ``t`` when::

    |s - t| <= abs_tol + rel_tol * |t|

(datacompy's rule, with the truth as the reference). Both tolerances default to zero, so the
default is exact equality of ``DECIMAL`` sums. Event counts are always compared exactly: a
tolerance is for money rounding upstream, never for a lost event. A window absent on one side
never matches (it is ``missing_in_stream`` or ``extra_in_stream``, not a zero).
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

from pyspark.sql import Column
from pyspark.sql import functions as F

__all__ = ["Tolerance", "parse_tolerance"]


@dataclass(frozen=True)
class Tolerance:
    """``abs_tol`` in currency units, ``rel_tol`` a fraction of the truth (0.001 = 0.1%)."""

    abs_tol: Decimal = Decimal(0)
    rel_tol: Decimal = Decimal(0)

    def __post_init__(self) -> None:
        for name in ("abs_tol", "rel_tol"):
            value = getattr(self, name)
            if not isinstance(value, Decimal):
                object.__setattr__(self, name, value := parse_tolerance(str(value), name))
            if value < 0 or not value.is_finite():
                raise ValueError(f"{name} must be a finite number >= 0, got {value}")

    @property
    def exact(self) -> bool:
        return self.abs_tol == 0 and self.rel_tol == 0

    def amounts_match(self, stream: Column, truth: Column) -> Column:
        """The rule above as a Spark column (null when either side is null)."""
        if self.exact:
            return stream == truth
        bound = F.lit(str(self.abs_tol)).cast("decimal(38,18)") + F.lit(str(self.rel_tol)).cast(
            "decimal(38,18)"
        ) * F.abs(truth)
        return F.abs(stream - truth) <= bound

    def describe(self) -> str:
        return "exact" if self.exact else f"|stream - truth| <= {self.abs_tol} + {self.rel_tol} * |truth|"


def parse_tolerance(text: str, name: str) -> Decimal:
    """A tolerance given as text (``0.01``); the message names the bad value."""
    try:
        value = Decimal(text)
    except InvalidOperation:
        raise ValueError(f"{name}: {text!r} is not a number; use e.g. 0.01") from None
    if not value.is_finite() or value < 0:
        raise ValueError(f"{name}: {text!r} must be a finite number >= 0")
    return value

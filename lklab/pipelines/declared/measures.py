"""A declared pipeline's measures: the numbers summed exactly per key and window.

A measure's type is written ``"long"`` (a whole number within 64 bits, summed as an integer:
Arrow ``int64``, Spark ``bigint``) or ``"decimal(p,s)"`` (``p`` digits, 1..38, ``s`` of them after
the point, 0..p: Arrow ``decimal128(p,s)``, Spark ``decimal(p,s)``; summed exactly, never as a
float). 38 is the most digits Arrow's and Spark's 128-bit decimals hold.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

__all__ = ["MEASURE_TYPES", "MAX_PRECISION", "Measure", "measure_of"]

MEASURE_TYPES = ('"long"', '"decimal(p,s)" with precision p 1..38 and scale s 0..p')
MAX_PRECISION = 38
_DECIMAL_TYPE = re.compile(r"decimal\(\s*([0-9]+)\s*,\s*([0-9]+)\s*\)")


@dataclass(frozen=True)
class Measure:
    """A number summed exactly per key and window: ``long`` (a whole number in 64 bits) or
    ``decimal`` with ``precision`` digits, ``scale`` of them after the point."""

    name: str
    type: str  # "long" | "decimal"
    precision: int = 19
    scale: int = 0

    @property
    def arrow_type(self) -> pa.DataType:
        return pa.int64() if self.type == "long" else pa.decimal128(self.precision, self.scale)

    @property
    def declared(self) -> str:
        """The type as a declaration writes it."""
        return "long" if self.type == "long" else f"decimal({self.precision},{self.scale})"


def measure_of(name: str, text: Any) -> Measure:
    """The measure ``name`` of the type written ``text``, or ``ValueError`` naming the valid forms."""
    where = f"measures.{name}"
    if text == "long":
        return Measure(name, "long")
    match = _DECIMAL_TYPE.fullmatch(text) if isinstance(text, str) else None
    if match is None:
        raise ValueError(f"{where}: {text!r} is not a measure type; valid: {', '.join(MEASURE_TYPES)}")
    precision, scale = int(match.group(1)), int(match.group(2))
    if not 1 <= precision <= MAX_PRECISION or scale > precision:
        raise ValueError(
            f"{where}: {text!r} is out of range; valid: precision 1..{MAX_PRECISION} and scale 0..precision"
        )
    return Measure(name, "decimal", precision, scale)

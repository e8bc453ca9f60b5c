"""Rules on a declared pipeline's field values: ``[pipelines.NAME.fields.FIELD]``.

A key's table takes ``values``, the list of the values it may hold, compared as the text the
key is kept as (an integer as its digits: ``values = ["7"]`` and ``values = [7]`` say the same).
A measure's takes ``min`` and ``max``, bounds included, compared exactly with the measure's
value: a TOML integer, a TOML float as written (``1.5``) or a string for an exact decimal
(``"0.001"``). A field outside its rule is a dead letter (``value_not_allowed``, ``below_min``,
``above_max``: ``lklab.pipelines.declared.parse``).
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

__all__ = ["FIELD_RULE_KEYS", "FieldRule", "field_rules"]

FIELD_RULE_KEYS = ("values", "min", "max")


@dataclass(frozen=True)
class FieldRule:
    """What a field's values may be: one of ``values`` (a key), at least ``min`` and at most
    ``max`` (a measure). None: no limit."""

    values: tuple[str, ...] | None = None
    min: Decimal | None = None
    max: Decimal | None = None


def _bound(where: str, value: Any) -> Decimal | None:
    if value is None:
        return None
    try:
        if isinstance(value, bool) or not isinstance(value, int | float | str):
            raise InvalidOperation
        bound = Decimal(str(value))  # a TOML float as written (str gives its shortest form)
        if not bound.is_finite():
            raise InvalidOperation
    except InvalidOperation:
        raise ValueError(f"{where}: {value!r} is not a number; valid: a TOML number or a decimal string") from None
    return bound


def _key_rule(where: str, rule: dict) -> FieldRule:
    if "min" in rule or "max" in rule:
        raise ValueError(f"{where}: min and max are a measure's; valid for a key: values")
    values = rule.get("values")
    if values is None:
        return FieldRule()
    if (
        not isinstance(values, list)
        or not values
        or not all(isinstance(v, str | int) and not isinstance(v, bool) for v in values)
    ):
        raise ValueError(f"{where}.values: {values!r} is not valid; valid: a non-empty list of strings")
    return FieldRule(values=tuple(str(v) for v in values))


def _measure_rule(where: str, rule: dict) -> FieldRule:
    if "values" in rule:
        raise ValueError(f"{where}: values is a key's; valid for a measure: min, max")
    low, high = _bound(f"{where}.min", rule.get("min")), _bound(f"{where}.max", rule.get("max"))
    if low is not None and high is not None and low > high:
        raise ValueError(f"{where}: min {low} is above max {high}; valid: min <= max")
    return FieldRule(min=low, max=high)


def field_rules(raw: Any, keys: tuple[str, ...], measures: tuple[str, ...], section: str) -> dict[str, FieldRule]:
    """The rules of a declaration's ``fields`` table (``raw``, as TOML gives it) by field name,
    or ``ValueError`` naming the key and what is valid; ``section`` is where ``fields`` is."""
    if not isinstance(raw, dict) or not all(isinstance(v, dict) for v in raw.values()):
        raise ValueError(f"fields: holds one table per field, [{section}.fields.FIELD]")
    rules: dict[str, FieldRule] = {}
    for name, rule in raw.items():
        where = f"fields.{name}"
        if name not in (*keys, *measures):
            raise ValueError(f"{where}: {name!r} is neither a key nor a measure; valid: {', '.join(keys + measures)}")
        unknown = sorted(set(rule) - set(FIELD_RULE_KEYS))
        if unknown:
            raise ValueError(f"{where}: unknown key(s) {', '.join(unknown)}; valid keys: {', '.join(FIELD_RULE_KEYS)}")
        rules[name] = _key_rule(where, rule) if name in keys else _measure_rule(where, rule)
    return rules

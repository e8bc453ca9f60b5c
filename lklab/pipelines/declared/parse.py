"""A declared pipeline's log lines, parsed and validated by its declaration, in Arrow.

Every line first gets the checks every line gets (``shared.line_checks.read_event_line``: its
bytes, its JSON, heartbeats), then the declaration's, in the order of ``REJECT_REASONS``, the
first failure named with the field as ``reject_detail``:

* ``missing_field``: the event id, a key, a measure or the event time is absent, null or
  blank text. The ingest time is optional.
* ``wrong_type``: the event id or a key is neither a string nor a JSON integer (a key is kept
  as text; an integer as its decimal digits, so ``42`` and ``"42"`` are one key); the event
  time is not a string.
* ``invalid_measure``: a measure is not a number: a JSON number, or a string of digits with an
  optional ``-`` and decimal point (``"12.345"``; no exponent, no spaces). ``true`` and
  ``false`` are not numbers. JSON numbers are read exactly, from their digits: ``1e3`` is
  1000, ``0.1`` is one tenth, never a float.
* ``measure_out_of_range``: by its exact value, a measure has more decimals than its scale
  (``12.3456`` in ``decimal(18,3)``; ``12.3450`` fits) or more integer digits than precision
  minus scale allow; a ``long`` is a whole number (``12.0`` and ``1e3`` are) within 64 bits.
* ``value_not_allowed``, ``below_min``, ``above_max``: a field's rule (``[...fields.NAME]``).
* ``invalid_event_time``, ``invalid_ingest_time`` (detail: the declared field),
  ``event_time_in_future``: the lab's clock checks (``shared.line_checks.event_clock``).

The ingest time is the declared ``ingest-time`` field; where a line lacks it, the line's
ingest time as every pipeline reads it (``shared.line_checks``): its own ``ingest_time``, else
the stamp of the append that wrote it (its segment's ``appended_at``). The event id lands in
``event_id``, the times in ``event_time`` and ``ingest_time`` (UTC microseconds), the keys
and measures in columns of their own names. Nothing is dropped: every line is one row, an
event, a heartbeat or a dead letter.
"""

from __future__ import annotations

import re
from decimal import Decimal, localcontext
from functools import partial

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql.pandas.types import from_arrow_schema

from lklab.pipelines.declared.declaration import Declaration
from lklab.pipelines.declared.measures import Measure
from shared.line_checks import dead_letter_row, event_clock, iso_micros, read_event_line, reject_reasons
from shared.line_rows import event_schema, parsed_schema, parsed_table
from shared.spark_arrow import per_partition

__all__ = ["REJECT_REASONS", "parsed_schema_of", "parse_declared_line", "parse_declared_lines", "parse_declared"]

REJECT_REASONS = reject_reasons(
    {
        "invalid_measure": (
            'a measure is not a number: a JSON number or a string such as "-12.5"; true and false are not '
            "(detail: the field)"
        ),
        "measure_out_of_range": (
            "a measure has more decimals than its scale or more digits than its precision; a long is a whole "
            "number within 64 bits (detail: the field)"
        ),
        "value_not_allowed": "a key's value is not one of its declared values (detail: the field)",
        "below_min": "a measure is below its declared min (detail: the field)",
        "above_max": "a measure is above its declared max (detail: the field)",
    }
)
_DECIMAL_TEXT = re.compile(r"-?[0-9]+(\.[0-9]+)?")
_LONG_BOUND = 1 << 63


def parsed_schema_of(declaration: Declaration) -> pa.Schema:
    """The parsed line's row (``shared.line_rows``): position, ``event_id``, the keys (strings)
    and the measures (``int64`` or ``decimal128(p,s)``) under their own names, the clock, then
    ``raw_line`` and what parsing made of the line."""
    keys = [pa.field(key, pa.string()) for key in declaration.keys]
    measures = [pa.field(m.name, m.arrow_type) for m in declaration.measures]
    return parsed_schema(event_schema(*keys, *measures))


def _blank(value: object) -> bool:
    return value is None or (isinstance(value, str) and not value.strip(" "))


def _as_text(value: object) -> str | None:
    """A string as it is, a JSON integer as its digits; None for anything else."""
    if isinstance(value, str):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return None


def _number(value: object) -> Decimal | None:
    """The exact number a measure's value holds (None: it is not one)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | Decimal):
        return Decimal(value)
    if isinstance(value, str) and _DECIMAL_TEXT.fullmatch(value):
        return Decimal(value)
    return None


def _in_range(number: Decimal, measure: Measure) -> int | Decimal | None:
    """``number`` as its column holds it, or None when the measure's type cannot hold it exactly."""
    _, digits, exponent = number.as_tuple()
    trailing_zeros = next((i for i, d in enumerate(reversed(digits)) if d), None)
    decimals = 0 if trailing_zeros is None else -exponent - trailing_zeros  # None: the number is zero
    if decimals > measure.scale:
        return None
    if measure.type == "long":
        return int(number) if -_LONG_BOUND <= number < _LONG_BOUND else None
    if abs(number) >= Decimal(10) ** (measure.precision - measure.scale):
        return None
    with localcontext(prec=measure.precision + 1):
        return number.quantize(Decimal(1).scaleb(-measure.scale))


def parse_declared_line(
    declaration: Declaration, line: bytes, line_bytes: int | None, appended_at: str | None = None
) -> dict:
    """One line's fields by column name (times in microseconds), or its dead letter
    (``reject_reason``, ``reject_detail``); ``line_bytes`` is the whole line's length (None:
    ``line`` is whole), ``appended_at`` its segment's stamp (``shared.line_checks``)."""
    value, stamped, settled = read_event_line(line, line_bytes, appended_at, exact_numbers=True)
    if settled is not None:
        return settled
    d = declaration
    for name in (d.event_id, *d.keys, *(m.name for m in d.measures), d.event_time):
        if _blank(value.get(name)):
            return dead_letter_row("missing_field", name)
    texts = {name: _as_text(value[name]) for name in (d.event_id, *d.keys)}
    for name, text in texts.items():
        if text is None:
            return dead_letter_row("wrong_type", name)
    if not isinstance(value[d.event_time], str):
        return dead_letter_row("wrong_type", d.event_time)
    numbers = {m.name: _number(value[m.name]) for m in d.measures}
    for name, number in numbers.items():
        if number is None:
            return dead_letter_row("invalid_measure", name)
    measures = {m.name: _in_range(numbers[m.name], m) for m in d.measures}
    for name, held in measures.items():
        if held is None:
            return dead_letter_row("measure_out_of_range", name)
    for name in d.keys:
        allowed = d.rules[name].values if name in d.rules else None
        if allowed is not None and texts[name] not in allowed:
            return dead_letter_row("value_not_allowed", name)
    for name, number in numbers.items():
        rule = d.rules.get(name)
        if rule is not None and rule.min is not None and number < rule.min:
            return dead_letter_row("below_min", name)
        if rule is not None and rule.max is not None and number > rule.max:
            return dead_letter_row("above_max", name)
    ingest_field = d.ingest_time if d.ingest_time is not None and value.get(d.ingest_time) is not None else None
    if ingest_field in (None, "ingest_time"):  # the log's own field: read with the line
        ingest_field, ingest_time = "ingest_time", stamped
    ingest_text = value.get(ingest_field)
    if ingest_field != "ingest_time":
        ingest_time = iso_micros(ingest_text) if isinstance(ingest_text, str) else None
    event_time, rejection = event_clock(value[d.event_time], ingest_text, ingest_time, d.max_clock_skew)
    if rejection is not None:
        reason, detail = rejection
        named = {"invalid_event_time": d.event_time, "invalid_ingest_time": ingest_field}
        return dead_letter_row(reason, named.get(reason, detail))
    return {
        "event_id": texts[d.event_id],
        **{key: texts[key] for key in d.keys},
        **measures,
        "event_time": event_time,
        "ingest_time": ingest_time,
        "reject_reason": None,
    }


def parse_declared_lines(declaration: Declaration, raw: pa.Table) -> pa.Table:
    """``parsed_schema_of(declaration)`` rows for raw log lines (``segment``, ``line_number``,
    ``raw_line`` and ``line_bytes``), one per line, in the order given."""
    return parsed_table(raw, partial(parse_declared_line, declaration), parsed_schema_of(declaration))


def parse_declared(raw: DataFrame, declaration: Declaration) -> DataFrame:
    """``parse_declared_lines`` over a Spark DataFrame of raw log lines, each Arrow batch in the
    executors' Python workers (the same code: the two forms cannot differ). The clock check
    uses the declaration's ``max_clock_skew``; a command overriding it passes a declaration
    with it replaced (``dataclasses.replace``)."""
    schema = from_arrow_schema(parsed_schema_of(declaration))
    return per_partition(raw, partial(parse_declared_lines, declaration), schema)

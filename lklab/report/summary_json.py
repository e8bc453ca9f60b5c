"""``summary.json``: the whole report as JSON, plus every derived figure the pages show.

Conventions (also written into the file under ``conventions``):

* every exact number (money, seconds measured on the data, ratios, probabilities) is a string
  with exactly ``SCALE`` (6) decimal places, e.g. ``"1234.500000"``; money is per currency
  (an object keyed by currency code) and never summed across currencies;
* compute cost seconds are JSON numbers (floats as measured);
* times are ISO-8601 UTC strings ending in ``Z``.

``report`` holds the model field by field, so ``report_from_json(to_json(r)) == r``.
``derived`` holds what the renderers compute from it: the side-by-side table with its winners,
the per-account totals of the finance audit, and the first screen's answer (``decision``, with
its ``headline_table`` as the pages print it); it is ignored when reading back.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import types
import typing
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from . import formats
from .comparison import compare
from .decision import decide, headline_table
from .model import Report
from .validation import SCALE

__all__ = ["FORMAT", "to_json", "to_document", "report_from_json"]

FORMAT = "lklab-compare-report/3"  # 3: a cost split names its points (micro-batches or runs)

CONVENTIONS = {
    "exact_numbers": f"strings with {SCALE} decimal places (money, data-measured seconds, ratios, probabilities)",
    "money": "per currency, keyed by ISO 4217 code; never summed across currencies; absent currency = 0",
    "ratios": "fractions (1.000000 = 100%), judged at 4 decimal places",
    "cost_seconds": "JSON numbers, CPU = user + system of all processes of the path",
    "times": "ISO-8601 UTC, suffix Z; processing time is the log's clock (ingest time made monotone in log order)",
    "comparison_winners": "indexes into comparison.configurations; all tied values win; none when fewer than two values or all equal",
}


def _encode(value: Any) -> Any:
    if dataclasses.is_dataclass(value):
        return {f.name: _encode(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Decimal):
        return formats.exact(value)
    if isinstance(value, dt.datetime):
        return formats.iso(value)
    if isinstance(value, Mapping):
        return {str(k): _encode(v) for k, v in value.items()}
    if isinstance(value, (tuple, list)):
        return [_encode(v) for v in value]
    return value


def to_document(report: Report) -> dict:
    """The JSON document as Python objects (strings for exact numbers)."""
    comparison = compare(report)
    decision = decide(report)
    header, rows = headline_table(decision)
    return {
        "format": FORMAT,
        "conventions": CONVENTIONS,
        "report": _encode(report),
        "derived": {
            "configuration_keys": [c.key for c in report.configurations],
            "configuration_labels": [c.label for c in report.configurations],
            "comparison": _encode(comparison.rows),
            "audit_currency_totals": _encode(report.audit.currency_totals()),
            "audit_account_totals": _encode(report.audit.account_totals()),
            "decision": _encode(decision),
            "headline_table": {"header": list(header), "rows": [list(row) for row in rows]},
        },
    }


def to_json(report: Report) -> str:
    return json.dumps(to_document(report), indent=1, ensure_ascii=False, allow_nan=False) + "\n"


def _decode(value: Any, hint: Any) -> Any:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        if value is None:
            return None
        options = [a for a in args if a is not type(None)]
        if isinstance(value, str) and Decimal in options:
            return Decimal(value)
        return _decode(value, options[0])
    if origin is typing.Literal or hint is str:
        return value
    if origin is tuple:
        return tuple(_decode(v, args[0]) for v in value)
    if origin in (dict, Mapping, typing.Mapping) or hint is dict:
        return {k: _decode(v, args[1]) for k, v in value.items()} if args else dict(value)
    if hint is Decimal:
        return Decimal(value)
    if hint is dt.datetime:
        return dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    if hint is float:
        return float(value)
    if dataclasses.is_dataclass(hint):
        hints = typing.get_type_hints(hint)
        fields = {f.name for f in dataclasses.fields(hint)}
        return hint(**{name: _decode(value[name], hints[name]) for name in fields if name in value})
    return value


def report_from_json(text: str) -> Report:
    """Read ``summary.json`` back into the report it was written from."""
    document = json.loads(text)
    if document.get("format") != FORMAT:
        raise ValueError(f"not a comparison report: format {document.get('format')!r}, expected {FORMAT!r}")
    return _decode(document["report"], Report)

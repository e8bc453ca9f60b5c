"""A pipeline declared in the lab's TOML file: what its events hold and how they are windowed.

A ``[pipelines.NAME]`` section with a ``kind`` declares a pipeline over the user's own
JSON-lines events, with no code written (a section without ``kind`` holds settings for a
registered pipeline, ``shared.config``)::

    [pipelines.meter_kwh]
    kind = "windowed"              # a count and exact sums per key and window
    event-id = "reading_id"        # the dedup key
    event-time = "read_at"         # ISO-8601 with Z or an offset
    ingest-time = "received_at"    # optional
    keys = ["meter", "region"]     # grouping fields, kept under their own names
    window-kind = "tumbling"
    window-size = "5m"
    watermark-delay = "2m"

    [pipelines.meter_kwh.measures]
    kwh = "decimal(18,3)"          # summed exactly; "long" is summed as an integer

    [pipelines.meter_kwh.fields.region]
    values = ["north", "south"]    # a key's allowed values; a measure takes min and max

``declarations`` validates every declared section of a file at once and refuses the first
thing wrong with a ``DeclarationError`` naming the section, the key and what is valid. The
window and stream settings a section leaves out are the lab's (``defaults``, a ``LabConfig``:
the file's top-level settings, then the lab's defaults). ``load_declarations`` is what the
command line calls with its ``--config``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lklab.pipelines.declared.field_rules import FieldRule, field_rules
from lklab.pipelines.declared.measures import Measure, measure_of
from shared.config import (
    DECLARED_KIND,
    SECTIONS,
    ConfigError,
    LabConfig,
    config_file_of,
    load_config,
    read_config_file,
    setting_value,
)
from shared.windows import WINDOW_KINDS, WindowSpec, window_spec

__all__ = [
    "KINDS",
    "RESERVED_COLUMNS",
    "DECLARATION_KEYS",
    "DeclarationError",
    "Measure",
    "FieldRule",
    "Declaration",
    "declarations",
    "load_declarations",
    "load_declaration",
]

KINDS = ("windowed",)
# Columns the lab's rows of a declared pipeline hold under these names: a key or a measure
# cannot take one. The event id and the times are held as ``event_id``, ``event_time`` and
# ``ingest_time`` whatever their fields are called, so a field may carry its own column's name.
RESERVED_COLUMNS = (
    "segment",
    "line_number",
    "line_bytes",
    "raw_line",
    "event_id",
    "event_time",
    "ingest_time",
    "reject_reason",
    "reject_detail",
    "heartbeat",
    "window_start",
    "window_end",
    "event_count",
    "batch_id",
)
_REQUIRED = ("kind", "event-id", "event-time", "keys")
_WINDOW_KEYS = ("window-kind", "window-size", "window-slide", "session-gap")
_STREAM_KEYS = (
    "watermark-delay",
    "watermark-interval",
    "allowed-lateness",
    "dedup-horizon",
    "heartbeat-interval",
    "max-clock-skew",
    "max-line-bytes",
)
DECLARATION_KEYS = (*_REQUIRED, "ingest-time", *_WINDOW_KEYS, *_STREAM_KEYS, "measures", "fields")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class DeclarationError(ConfigError):
    """A declared pipeline is wrong; the message names its section, the key and what is valid."""


@dataclass(frozen=True)
class Declaration:
    """A declared pipeline, validated. Durations are microseconds, as in ``LabConfig``."""

    name: str
    kind: str
    event_id: str
    event_time: str
    ingest_time: str | None
    keys: tuple[str, ...]
    measures: tuple[Measure, ...]
    window: WindowSpec
    watermark_delay: int
    watermark_interval: int
    allowed_lateness: int
    dedup_horizon: int
    heartbeat_interval: int
    max_clock_skew: int
    max_line_bytes: int
    rules: Mapping[str, FieldRule] = field(default_factory=dict)

    @property
    def fields(self) -> tuple[str, ...]:
        """Every field the declaration reads from a line, in the order they are checked."""
        ingest = () if self.ingest_time is None else (self.ingest_time,)
        return (self.event_id, *self.keys, *(m.name for m in self.measures), self.event_time, *ingest)


def _refuse(name: str, message: str) -> DeclarationError:
    return DeclarationError(f"[{SECTIONS}.{name}] {message}")


def _field_name(pipeline: str, key: str, value: Any) -> str:
    if not isinstance(value, str) or not _NAME.fullmatch(value):
        raise _refuse(
            pipeline, f"{key}: {value!r} is not a field name; valid: letters, digits and _, not starting with a digit"
        )
    return value


def _declaration(name: str, section: dict[str, Any], defaults: LabConfig) -> Declaration:
    unknown = sorted(set(section) - set(DECLARATION_KEYS))
    if unknown:
        raise _refuse(name, f"unknown key(s) {', '.join(unknown)}; valid keys: {', '.join(DECLARATION_KEYS)}")
    missing = [key for key in _REQUIRED if key not in section]
    if missing:
        raise _refuse(name, f"missing key(s) {', '.join(missing)}; a declared pipeline needs {', '.join(_REQUIRED)}")
    if section["kind"] not in KINDS:
        raise _refuse(name, f"kind: {section['kind']!r} is not valid; valid: {', '.join(KINDS)}")
    event_id = _field_name(name, "event-id", section["event-id"])
    event_time = _field_name(name, "event-time", section["event-time"])
    ingest_time = section.get("ingest-time")
    ingest_time = None if ingest_time is None else _field_name(name, "ingest-time", ingest_time)
    keys = section["keys"]
    if not isinstance(keys, list) or not keys:
        raise _refuse(name, f"keys: {keys!r} is not valid; valid: a non-empty list of field names")
    keys = tuple(_field_name(name, "keys", key) for key in keys)
    raw_measures = section.get("measures", {})
    if not isinstance(raw_measures, dict):
        raise _refuse(name, f'measures: holds one type per field, [{SECTIONS}.{name}.measures] FIELD = "long"')
    for field_name in raw_measures:
        _field_name(name, f"measures.{field_name}", field_name)
    try:
        measures = tuple(measure_of(field_name, text) for field_name, text in raw_measures.items())
    except ValueError as err:
        raise _refuse(name, str(err)) from None

    roles = [("event-id", event_id), ("event-time", event_time)]
    roles += [("ingest-time", ingest_time)] if ingest_time is not None else []
    roles += [("keys", key) for key in keys] + [(f"measures.{m.name}", m.name) for m in measures]
    seen: dict[str, str] = {}
    for role, field_name in roles:
        if field_name in seen:
            raise _refuse(
                name, f"{role}: field {field_name!r} is already {seen[field_name]}; valid: each field in one role"
            )
        seen[field_name] = role
    own_column = {"event-id": "event_id", "event-time": "event_time", "ingest-time": "ingest_time"}
    for role, field_name in roles:
        if field_name in RESERVED_COLUMNS and field_name != own_column.get(role):
            raise _refuse(
                name,
                f"{role}: {field_name!r} is a column of the lab's own; valid: any other name "
                f"(reserved: {', '.join(RESERVED_COLUMNS)})",
            )

    def setting(key: str) -> Any:
        if key not in section:
            return getattr(defaults, key.replace("-", "_"))
        try:
            return setting_value(key, section[key])
        except ConfigError as err:
            raise _refuse(name, str(err)) from None

    window_kind = section.get("window-kind", defaults.window_kind)
    if window_kind not in WINDOW_KINDS:
        raise _refuse(name, f"window-kind: {window_kind!r} is not valid; valid: {', '.join(WINDOW_KINDS)}")
    size, slide, gap = setting("window-size"), setting("window-slide"), setting("session-gap")
    try:
        window = window_spec(window_kind, size=size, slide=slide, gap=gap)
    except ValueError as err:
        raise _refuse(name, str(err)) from None
    stream = {key.replace("-", "_"): setting(key) for key in _STREAM_KEYS}
    try:
        rules = field_rules(section.get("fields", {}), keys, tuple(m.name for m in measures), f"{SECTIONS}.{name}")
    except ValueError as err:
        raise _refuse(name, str(err)) from None
    return Declaration(
        name=name,
        kind=section["kind"],
        event_id=event_id,
        event_time=event_time,
        ingest_time=ingest_time,
        keys=keys,
        measures=measures,
        window=window,
        rules=rules,
        **stream,
    )


def declarations(raw: Mapping[str, Any], defaults: LabConfig | None = None) -> dict[str, Declaration]:
    """Every pipeline declared in a configuration file, as TOML gives it (``raw``), by name.

    A ``[pipelines.NAME]`` section with ``kind`` is one; the others are settings
    (``shared.config``). The first thing wrong raises ``DeclarationError``."""
    defaults = LabConfig() if defaults is None else defaults
    sections = raw.get(SECTIONS, {})
    if not isinstance(sections, dict):
        return {}  # shared.config refuses it, with its own message
    found = {}
    for name, section in sections.items():
        if not isinstance(section, dict) or DECLARED_KIND not in section:
            continue
        if not _NAME.fullmatch(name):
            raise _refuse(name, "the name is not valid; valid: letters, digits and _, not starting with a digit")
        found[name] = _declaration(name, section, defaults)
    return found


def load_declarations(
    config_file: str | Path | None = None, environ: Mapping[str, str] | None = None
) -> dict[str, Declaration]:
    """The pipelines declared in the configuration file in use (``--config``, ``$LKLAB_CONFIG``
    or ``./lklab.toml``), their defaults the file's top-level settings (the environment and
    flags are a command's, not the declaration's)."""
    path = config_file_of(config_file, environ)
    if path is None:
        return {}
    return declarations(read_config_file(path), load_config(path, environ={}))


def load_declaration(
    name: str, config_file: str | Path | None = None, environ: Mapping[str, str] | None = None
) -> Declaration:
    """The pipeline ``name`` declared in the configuration file in use, or ``DeclarationError``
    naming the ones it declares."""
    found = load_declarations(config_file, environ)
    if name not in found:
        raise DeclarationError(
            f"pipeline {name!r} is not declared in the configuration file; declared: {', '.join(found) or 'none'}"
        )
    return found[name]

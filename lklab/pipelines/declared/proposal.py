"""A declaration drafted from a sample of JSON-lines events, for the user to check (``lklab init``).

Each field of the sample's objects is judged by the values it holds on every line (a field
missing or null on one line is not proposed for any role). The guesses, in order:

* **event-id**: the first field named like an id (``id`` in its name) whose values, strings or
  integers, are all different;
* **event-time**: of the fields whose values are all ISO-8601 times with a zone, the first named
  like a time (``time`` in the name, or ending ``_at``) that is not named like an arrival
  (``receiv``, ``ingest``, ``arriv``); **ingest-time**: another such field, an arrival's first;
* **keys**: the string fields with few distinct values, at most half the lines' number and at
  most 20 (a field with more is more likely a label than a group);
* **measures**: the number fields: ``"long"`` when every value is a JSON integer, else
  ``"decimal(18,s)"`` with ``s`` the most decimals written in the sample.

The window is the lab's default. A key's values seen are written as a rule commented out.
Every guess has a comment saying what to check; a sample with no event id, no event time or no
key is refused (``ValueError``) rather than guessed at.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from decimal import Decimal

from lklab.pipelines.declared.declaration import RESERVED_COLUMNS
from shared.config import SECTIONS, LabConfig
from shared.durations import format_duration
from shared.line_checks import iso_micros, read_line
from shared.line_rows import HEARTBEAT_FIELD

__all__ = ["MAX_KEY_VALUES", "propose"]

MAX_KEY_VALUES = 20
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_TIME_NAME = re.compile(r"time|_at$", re.IGNORECASE)
_ARRIVAL_NAME = re.compile(r"receiv|ingest|arriv", re.IGNORECASE)


@dataclass
class _Field:
    name: str
    values: list = field(default_factory=list)

    def all(self, test) -> bool:
        return all(test(value) for value in self.values)


def _is_text(value: object) -> bool:
    return isinstance(value, str) and value.strip(" ") != ""


def _is_integer(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_time(value: object) -> bool:
    return isinstance(value, str) and iso_micros(value) is not None


def _decimals(value: int | Decimal) -> int:
    return 0 if isinstance(value, int) else max(0, -value.as_tuple().exponent)


def _fields(lines: Iterable[bytes]) -> tuple[int, list[str], list[_Field], int]:
    """(objects read, every field's name, the fields every object holds non-null, lines skipped)."""
    objects, skipped = [], 0
    for line in lines:
        value, rejection, _ = read_line(line, exact_numbers=True)
        if rejection is not None or value.get(HEARTBEAT_FIELD) is True:
            skipped += 1
            continue
        objects.append(value)
    if not objects:
        raise ValueError("the sample holds no JSON object line to propose a declaration from")
    names = list(dict.fromkeys(name for value in objects for name in value))
    found = [_Field(name, [value.get(name) for value in objects]) for name in names]
    return len(objects), names, [f for f in found if None not in f.values], skipped


def _first(fields: list[_Field], *tests) -> _Field | None:
    """The first field passing every test, else None."""
    return next((f for f in fields if all(test(f) for test in tests)), None)


def _quoted(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)  # a JSON string is a TOML basic string


def propose(name: str, lines: Iterable[bytes], sample: str = "the sample") -> str:
    """A TOML section declaring the pipeline ``name`` for events like ``lines`` (``sample``
    names them in the header), with a comment on what to check beside each guess."""
    read, names, fields, skipped = _fields(lines)
    usable = [f for f in fields if _NAME.fullmatch(f.name) and f.name not in RESERVED_COLUMNS]
    event_id = _first(
        usable,
        lambda f: "id" in f.name.lower(),
        lambda f: f.all(lambda v: _is_text(v) or _is_integer(v)),
        lambda f: len({str(v) for v in f.values}) == read,
    )
    if event_id is None:
        raise ValueError("no field named like an id holds a different value on every line: write event-id yourself")
    times = [f for f in usable if f is not event_id and f.all(_is_time)]
    event_time = _first(times, lambda f: _TIME_NAME.search(f.name), lambda f: not _ARRIVAL_NAME.search(f.name))
    event_time = event_time or (times[0] if times else None)
    if event_time is None:
        raise ValueError("no field holds ISO-8601 times with a zone on every line: write event-time yourself")
    others = [f for f in times if f is not event_time]
    ingest_time = _first(others, lambda f: _ARRIVAL_NAME.search(f.name)) or (others[0] if others else None)
    chosen = {event_id.name, event_time.name, *([ingest_time.name] if ingest_time else [])}
    few = min(MAX_KEY_VALUES, max(1, read // 2))
    keys = [
        f
        for f in usable
        if f.name not in chosen and f.all(_is_text) and not f.all(_is_time) and len(set(f.values)) <= few
    ]
    if not keys:
        raise ValueError(f"no string field has at most {few} distinct values on every line: write keys yourself")
    numbers = [f for f in usable if f.name not in chosen and f.all(lambda v: _is_integer(v) or isinstance(v, Decimal))]
    proposed = chosen | {f.name for f in keys} | {f.name for f in numbers}
    defaults = LabConfig()
    section = f"{SECTIONS}.{name}"
    out = [
        f"# Proposed by lklab init from {read} line(s) of {sample}"
        + (f" ({skipped} other line(s) skipped: not a JSON object, or a heartbeat)" if skipped else "")
        + ".",
        "# Every value below is a guess: check each one against what your events mean.",
        f"[{section}]",
        'kind = "windowed"',
        f"# the first id-like field whose {read} values are all different: check it names one event, resends included",
        f"event-id = {_quoted(event_id.name)}",
        "# when the event happened: check it is not when it was sent or received",
        f"event-time = {_quoted(event_time.name)}",
    ]
    if ingest_time is not None:
        out += [
            "# another time field, taken as when the event arrived: check it, or delete the line",
            f"ingest-time = {_quoted(ingest_time.name)}",
        ]
    out += [
        "# string fields with few values: the counts and sums are per combination of these",
        f"keys = [{', '.join(_quoted(f.name) for f in keys)}]",
        "# the lab's default windows: choose yours (tumbling | sliding with window-slide | session with session-gap)",
        f'window-kind = "{defaults.window_kind}"',
        f'window-size = "{format_duration(defaults.window_size)}"',
        f'watermark-delay = "{format_duration(defaults.watermark_delay)}"',
    ]
    if numbers:
        out += ["", f"[{section}.measures]"]
        for f in numbers:
            if f.all(_is_integer):
                out += ["# whole numbers only in the sample: summed as a 64-bit integer", f'{f.name} = "long"']
            else:
                scale = min(18, max(map(_decimals, f.values)))
                out += [
                    f"# at most {scale} decimal(s) in the sample: raise the scale if more can come",
                    f'{f.name} = "decimal(18,{scale})"',
                ]
    for f in keys:
        values = sorted(set(f.values))
        out += [
            "",
            f"[{section}.fields.{f.name}]",
            "# the values seen in the sample: uncomment to make any other value a dead letter",
            f"# values = [{', '.join(map(_quoted, values))}]",
        ]
    unused = [n for n in names if n not in proposed]
    if unused:
        out += ["", f"# not proposed (none of the roles above fits them): {', '.join(unused)}"]
    return "\n".join(out) + "\n"

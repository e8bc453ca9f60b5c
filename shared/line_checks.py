"""The checks every line of the log gets, whatever pipeline reads it: its bytes, its JSON, its clock.

The log is one stream of lines shared by every pipeline (``shared.eventlog``), and a line can be
bad in ways that have nothing to do with its fields. Each pipeline's parser
(``shared.events`` for billing, ``lklab.pipelines.unique_visitors.parse``, ``lklab.pipelines.order_payments.parse``) runs these checks
around its own field checks and names the first failure, in this order::

    line_too_long, invalid_utf8, empty_line, duplicate_key, not_json, not_an_object   (LINE_REASONS)
    missing_field, wrong_type, <the pipeline's own>, invalid_event_time, invalid_ingest_time
    event_time_in_future                                                              (CLOCK_REASONS)

(``reject_reasons`` composes that dict.) What each check means:

* **Bytes.** The readers hand over a line's bytes as they are, with ``line_bytes``, the length
  of the whole line (``shared.events.RAW_LINE_SCHEMA``). A line the reader cut (longer than
  ``max-line-bytes``: it holds fewer bytes than ``line_bytes``) is ``line_too_long`` and its
  dead letter keeps the part kept, as text (a character the cut split becomes U+FFFD). A line
  that is not UTF-8 is ``invalid_utf8`` and its dead letter keeps every byte, in base64. Neither
  is parsed at all.
* **JSON.** A blank line (spaces only), a repeated key in the outermost object (parsers differ
  on which value wins: ``duplicate_key``, detail the first key that repeats an earlier one), a
  line that is not JSON (a key repeated in a nested object makes the line ``not_json``, as
  Spark's parser refuses the whole line) and JSON that is not an object. A byte order mark
  inside a line is no whitespace: such a line is ``not_json``. Spark's parser reads the first
  JSON value of a line and ignores whatever follows it (``{...} x`` is that object), and so do
  the checks here in their Python form.
* **Ingest time.** A line's ingest time is its own ``ingest_time`` field where it has one (a
  null or a bad one included: the field is there), and otherwise its segment's stamp, the
  ``appended_at`` the readers give every line of a stamped segment (``shared.eventlog``): the
  moment the line was appended, kept apart from its bytes. A line with neither has none. The
  rule is written once per form: ``ingest_time_of`` (Spark) and ``read_event_line`` (Python).
* **Clock.** An event time more than ``max_clock_skew`` (microseconds, the ``max-clock-skew``
  setting) ahead of its line's ingest time is ``event_time_in_future``: an event cannot
  have happened after it arrived, and accepted, one event dated decades ahead would move the
  watermark there for good and make every later event late. A line without an ingest time is
  not checked. It is the last check: the line is otherwise a valid event.

The checks come in two forms over the same names, order, details and dead-letter text: Spark
columns (``line_checks``, ``ingest_time_of``, ``in_future``, ``future_check``, ``dead_letter_text``) for the
parsers that run in Spark, and Python (``read_line``, ``read_event_line``, ``event_clock``,
``future_rejection``) for the ones that run in Python over Arrow (``shared.line_rows.parsed_table``). ``tests/test_line_checks.py`` runs the same lines through both.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Callable
from datetime import UTC, datetime
from decimal import Decimal

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from shared.durations import format_duration
from shared.eventlog import LINE_PREFIX_BYTES
from shared.line_rows import HEARTBEAT_FIELD

__all__ = [
    "LINE_REASONS",
    "CLOCK_REASONS",
    "Check",
    "Rejection",
    "reject_reasons",
    "first_failure",
    "iso_micros",
    "event_clock",
    "let",
    "repeated_key",
    "line_checks",
    "dead_letter_text",
    "ingest_time_of",
    "OBJECT_START",
    "APPENDED_AT",
    "with_appended_at",
    "in_future",
    "future_check",
    "read_line",
    "read_event_line",
    "dead_letter_row",
    "future_rejection",
    "require_skew",
]

LINE_REASONS = {
    "line_too_long": (
        "the line is longer than max-line-bytes (detail: its length in bytes; raw_line holds its first "
        f"{LINE_PREFIX_BYTES:,} bytes, or max-line-bytes if fewer, as text)"
    ),
    "invalid_utf8": "the line is not UTF-8 text (raw_line holds its bytes in base64; the detail says so)",
    "empty_line": "the line is blank",
    "duplicate_key": "the line's object names a key twice (detail: the key); parsers differ on which value wins",
    "not_json": "the line is not valid JSON",
    "not_an_object": "the line is JSON but not an object",
}
_FIELD_REASONS = {
    "missing_field": "a required field is absent, null or empty (detail: the field)",
    "wrong_type": "a field is not a JSON string (detail: the field)",
}
_TIME_REASONS = {
    "invalid_event_time": "event_time is not ISO-8601 with Z or an offset",
    "invalid_ingest_time": "ingest_time is present but not ISO-8601 with Z or an offset",
}
CLOCK_REASONS = {
    "event_time_in_future": (
        "event_time is more than max-clock-skew ahead of the line's ingest_time (detail: both times and the skew)"
    ),
}

# The details, as ``str.format`` templates: one text whichever form fills it in.
_TOO_LONG = "{} bytes"
_NOT_UTF8 = "raw_line holds the line's {} bytes in base64"
_IN_FUTURE = "event_time {} is more than {} (max-clock-skew) ahead of ingest_time {}"
OBJECT_START = "^\\s*[{]"  # JSON that parsed is an object exactly when it opens so
_JSON_SPACE = " \t\n\r"
_SURROGATE = re.compile("[\ud800-\udfff]")

Check = tuple[Column, str, "str | Column | None"]  # (failed, reason, detail: a field's name or a column)
Rejection = tuple[str, "str | None"]  # (reason, detail)


def reject_reasons(own: dict[str, str]) -> dict[str, str]:
    """A parser's ``REJECT_REASONS``, in the order checked: the line's, the fields' presence and
    type, the pipeline's ``own`` checks, the times', the clock's."""
    return {**LINE_REASONS, **_FIELD_REASONS, **own, **_TIME_REASONS, **CLOCK_REASONS}


def require_skew(max_clock_skew: int) -> None:
    if max_clock_skew < 0:
        raise ValueError(f"max_clock_skew: {max_clock_skew} is not valid; valid: microseconds, 0 or more")


# ----------------------------------------------------------------------------- Spark columns

APPENDED_AT = "appended_at"  # a line's segment stamp, as the log's readers give it


def with_appended_at(raw: DataFrame) -> DataFrame:
    """``raw`` with an ``appended_at`` column: its own, or null for rows made without one
    (lines that carry their ingest time, as old segments' do)."""
    return raw if APPENDED_AT in raw.columns else raw.withColumn(APPENDED_AT, F.lit(None).cast("string"))


def ingest_time_of(kind: Column, text: Column, appended_at: Column, is_object: Column) -> tuple[Column, Column]:
    """A line's ingest time as ``(JSON type, text)`` (``schema_of_variant``'s type name, the
    string): the line's own ``ingest_time`` field's (``kind`` not null: the field is there, a
    JSON null's type being ``VOID``), else, for a JSON object (``is_object``: the line parsed,
    and is one), its segment's stamp ``appended_at``, a string (null: no stamp, and so no
    ingest time). A line that is no JSON object has no ingest time but its own."""
    absent = kind.isNull() & is_object
    return (
        F.when(absent & appended_at.isNotNull(), F.lit("STRING")).otherwise(kind),
        F.when(absent, appended_at).otherwise(text),
    )


def _filled(template: str, *values: Column) -> Column:
    """``template`` with its ``{}`` replaced by ``values`` (null when one is null)."""
    pieces = template.split("{}")
    parts = [F.lit(pieces[0])] if pieces[0] else []
    for value, piece in zip(values, pieces[1:]):
        parts.append(value.cast("string"))
        if piece:
            parts.append(F.lit(piece))
    return F.concat(*parts)


def first_failure(checks: list[Check]) -> Column:
    """``struct(reason, detail)`` of the first check that fails, null when none does
    (one ``CASE`` with a branch per check, in order). A detail is a field's name or a column."""
    result = None
    for failed, name, field in checks:
        detail = field if isinstance(field, Column) else F.lit(field)
        reason = F.struct(F.lit(name).alias("reason"), detail.cast("string").alias("detail"))
        result = F.when(failed, reason) if result is None else result.when(failed, reason)
    return result


def let(value: Column, body: Callable[[Column], Column]) -> Column:
    """``body(value)`` with ``value`` computed once (a lambda over a one-element array)."""
    return F.transform(F.array(value), body)[0]


def repeated_key(keys: Column) -> Column:
    """The first key of an array of an object's keys that repeats an earlier one (null: none)."""
    return F.try_element_at(F.filter(keys, lambda key, index: F.array_position(keys, key) < index + 1), F.lit(1))


def line_checks(
    raw_line: Column,
    line_bytes: Column,
    whole: Column,
    utf8: Column,
    repeated: Column,
    not_json: Column,
    is_object: Column | None = None,
) -> list[Check]:
    """The ``LINE_REASONS`` checks, in order.

    ``whole``: ``octet_length(raw_line) == line_bytes``; ``utf8``: ``is_valid_utf8(raw_line)``;
    parse JSON only when both hold. ``not_json``: the parse gave null; ``repeated``: when it did,
    ``repeated_key(json_object_keys(raw_line))`` (Spark's parser refuses an object that names a
    key twice, and ``json_object_keys`` tells such a line from one that is not JSON);
    ``is_object``: default ``raw_line`` opens with ``{`` after whitespace.
    """
    is_object = raw_line.rlike(OBJECT_START) if is_object is None else is_object
    return [
        (~whole, "line_too_long", _filled(_TOO_LONG, line_bytes)),
        (~utf8, "invalid_utf8", _filled(_NOT_UTF8, line_bytes)),
        (F.trim(raw_line) == "", "empty_line", None),
        (repeated.isNotNull(), "duplicate_key", repeated),
        (not_json, "not_json", None),
        (~is_object, "not_an_object", None),
    ]


def dead_letter_text(raw_line: Column, whole: Column, utf8: Column) -> Column:
    """What ``raw_line`` becomes in a dead letter when it is not text as it stands (null: it is):
    the part a cut line kept, made valid UTF-8; the bytes of a line that is not UTF-8, in base64."""
    encoded = F.replace(F.base64(raw_line.cast("binary")), F.lit("\r\n"), F.lit(""))  # Spark wraps it at 76 characters
    return F.when(~whole, F.make_valid_utf8(raw_line)).when(~utf8, encoded)


def in_future(event_time: Column, ingest_time: Column, max_clock_skew: int) -> Column:
    """The event time is more than ``max_clock_skew`` after the ingest time (false when either
    is null: nothing to compare)."""
    ahead = F.unix_micros(event_time) - F.unix_micros(ingest_time)
    return F.coalesce(ahead > F.lit(max_clock_skew), F.lit(False))


def future_check(
    event_time: Column, ingest_time: Column, event_text: Column, ingest_text: Column, max_clock_skew: int
) -> Check:
    """The ``event_time_in_future`` check: the typed times decide, the texts as written name them."""
    detail = _filled(_IN_FUTURE, event_text, F.lit(format_duration(max_clock_skew)), ingest_text)
    return in_future(event_time, ingest_time, max_clock_skew), "event_time_in_future", detail


# ----------------------------------------------------------------------------- Python


class _Object(dict):
    """A JSON object as ``json.loads`` builds it, with the first key that repeats an earlier one."""

    repeated: str | None = None


def _read_object(pairs: list[tuple[str, object]], nested_repeats: list[str]) -> _Object:
    value = _Object(pairs)
    if len(value) != len(pairs):
        seen: set[str] = set()
        value.repeated = next(key for key, _ in pairs if key in seen or seen.add(key))
        nested_repeats.append(value.repeated)
    return value


def _not_json(constant: str):
    raise ValueError(constant)  # NaN and Infinity are Python's, not JSON's


def _lone_surrogate(value: object) -> bool:
    """A string of ``value`` (a key included) holds half a surrogate pair: an escape such as
    ``"\\ud800"`` that Python's parser takes and Spark's refuses."""
    if isinstance(value, str):
        return _SURROGATE.search(value) is not None
    if isinstance(value, dict):
        return any(_lone_surrogate(key) or _lone_surrogate(item) for key, item in value.items())
    if isinstance(value, list):
        return any(map(_lone_surrogate, value))
    return False


def read_line(
    line: bytes, line_bytes: int | None = None, *, exact_numbers: bool = False
) -> tuple[object, Rejection | None, str | None]:
    """One line through the ``LINE_REASONS`` checks, in Python: ``(value, rejection, text)``.

    ``line``: the bytes the reader kept; ``line_bytes``: the whole line's length (None: ``line``
    is whole). ``value`` is the parsed JSON object (None when rejected), ``text`` what
    ``raw_line`` becomes in a dead letter when it is not text as it stands (None: it is).
    With ``exact_numbers``, a JSON number with a fraction or an exponent is a ``Decimal`` of the
    digits as written (``12.345``, ``1E+3``), not the nearest float.
    """
    if line_bytes is not None and len(line) != line_bytes:
        return None, ("line_too_long", _TOO_LONG.format(line_bytes)), line.decode("utf-8", errors="replace")
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError:
        return None, ("invalid_utf8", _NOT_UTF8.format(len(line))), base64.b64encode(line).decode("ascii")
    if text.strip(" ") == "":
        return None, ("empty_line", None), None
    repeats: list[str] = []
    decoder = json.JSONDecoder(
        parse_float=Decimal if exact_numbers else None,
        parse_constant=_not_json,
        object_pairs_hook=lambda pairs: _read_object(pairs, repeats),
    )
    try:
        # as Spark's parser reads a line: JSON whitespace, one value, and whatever follows it ignored
        value, _ = decoder.raw_decode(text, len(text) - len(text.lstrip(_JSON_SPACE)))
    except ValueError:
        return None, ("not_json", None), None
    if "\\u" in text and _lone_surrogate(value):
        return None, ("not_json", None), None
    if isinstance(value, _Object) and value.repeated is not None:
        return None, ("duplicate_key", value.repeated), None
    if repeats:  # only in a nested object: Spark's parser refuses the whole line
        return None, ("not_json", None), None
    if not isinstance(value, dict):
        return None, ("not_an_object", None), None
    return value, None, None


def dead_letter_row(reason: str, detail: str | None = None, text: str | None = None) -> dict:
    """A dead letter's fields as a Python parser gives them: ``reject_reason``, ``reject_detail``
    and ``raw_text``, what its ``raw_line`` becomes when it is not text as it stands (None: it is)."""
    return {"reject_reason": reason, "reject_detail": detail, HEARTBEAT_FIELD: False, "raw_text": text}


def read_event_line(
    line: bytes, line_bytes: int | None = None, appended_at: str | None = None, *, exact_numbers: bool = False
) -> tuple[dict | None, int | None, dict | None]:
    """A line through what every line gets before its format's own checks, in Python:
    ``(value, ingest_time, settled)``.

    ``settled`` is the line's fields when these checks decide it (None: they do not): a dead
    letter of ``read_line``, a heartbeat (``{"heartbeat": true, "ingest_time": ...}``), or a
    heartbeat's dead letter (``missing_field`` or ``invalid_ingest_time``, detail
    ``ingest_time``). Otherwise ``value`` is the line's JSON object and ``ingest_time`` its
    ingest time in microseconds (None when it has none or it is not a time: ``event_clock``
    tells); ``exact_numbers`` as ``read_line``'s.

    The ingest time is the line's own ``ingest_time`` field where it has one, else its segment's
    stamp ``appended_at`` (the module docstring): ``value`` then holds the stamp under
    ``ingest_time``, as a line stamped inside (an old segment's) holds it.
    """
    value, rejection, text = read_line(line, line_bytes, exact_numbers=exact_numbers)
    if rejection is not None:
        return None, None, dead_letter_row(*rejection, text)
    if appended_at is not None and "ingest_time" not in value:
        value["ingest_time"] = appended_at
    ingest = value.get("ingest_time")
    ingest_time = iso_micros(ingest) if isinstance(ingest, str) else None
    if value.get(HEARTBEAT_FIELD) is not True:
        return value, ingest_time, None
    if ingest_time is None:
        return None, None, dead_letter_row("missing_field" if ingest is None else "invalid_ingest_time", "ingest_time")
    return (
        None,
        ingest_time,
        {"ingest_time": ingest_time, "reject_reason": None, "reject_detail": None, HEARTBEAT_FIELD: True},
    )


_ISO_TIMESTAMP = re.compile(
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,6})?(Z|[+-][0-9]{2}:[0-9]{2})"
)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def iso_micros(text: str) -> int | None:
    """Microseconds since the epoch of an ISO-8601 time with ``Z`` or an offset (None if not one)."""
    if not _ISO_TIMESTAMP.fullmatch(text):
        return None
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:  # e.g. a 30th of February, or an offset of +25:00
        return None
    delta = moment - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def event_clock(
    event_text: str, ingest_text: object, ingest_time: int | None, max_clock_skew: int
) -> tuple[int | None, Rejection | None]:
    """A line's event time in microseconds, or the clock check it fails first:
    ``invalid_event_time`` (not ISO-8601 with a zone), ``invalid_ingest_time`` (an
    ``ingest_time`` that is there but not a time), ``event_time_in_future``."""
    event_time = iso_micros(event_text)
    if event_time is None:
        return None, ("invalid_event_time", "event_time")
    if ingest_text is not None and ingest_time is None:
        return None, ("invalid_ingest_time", "ingest_time")
    return event_time, future_rejection(event_time, ingest_time, event_text, ingest_text, max_clock_skew)


def future_rejection(
    event_time: int, ingest_time: int | None, event_text: str, ingest_text: str | None, max_clock_skew: int
) -> Rejection | None:
    """The ``event_time_in_future`` check on times in microseconds (None: no ingest time, no check)."""
    if ingest_time is None or event_time - ingest_time <= max_clock_skew:
        return None
    return "event_time_in_future", _IN_FUTURE.format(event_text, format_duration(max_clock_skew), ingest_text)

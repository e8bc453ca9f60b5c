"""The checks every log line gets (``shared.line_checks``) decide the same in their Spark form and
their Python form: the same lines through the page-view parser (Spark columns, as billing's) and
the order parser (Python, also run by Spark partition by partition) get the same reason, detail
and dead-letter text whenever a line check fails, and pass the same lines on to the field checks.
The lines sit on the edges of Spark's JSON parser, which the Python form follows: whitespace,
byte order marks, what follows the first value, repeated and nested keys, escapes."""

from __future__ import annotations

import pyarrow as pa

from lklab.pipelines.order_payments.parse import REJECT_REASONS as ORDER_REASONS
from lklab.pipelines.order_payments.parse import parse_order_events, parse_order_lines
from lklab.pipelines.unique_visitors.parse import REJECT_REASONS as PAGE_VIEW_REASONS
from lklab.pipelines.unique_visitors.parse import parse_page_views
from shared.line_checks import CLOCK_REASONS, LINE_REASONS, reject_reasons
from tests.conftest import raw_frame, read_as_the_log_does

OBJECT = b'{"event_id": "e-1", "note": "\xe2\x82\xac"}'
LINES = [
    b"",
    b" ",
    b"   ",
    b"\t",
    b"\r",
    b" \t ",
    b"{",
    b"}",
    b"{}",
    b"[]",
    b"[1, 2]",
    b'"text"',
    b"null",
    b"true",
    b"42",
    b"NaN",
    b'{"a": NaN}',
    b'{"a": 1,}',
    OBJECT,
    b" " + OBJECT + b" ",
    b"\t" + OBJECT,
    b"\xef\xbb\xbf" + OBJECT,
    OBJECT + b"\xef\xbb\xbf",
    b'{"a": 1, "a": 2}',
    b'{"a": 1, "b": 2, "b": 3, "a": 4}',
    b'{"\\u0061": 1, "a": 2}',
    b'{"a": {"k": 1, "k": 2}}',
    b'{"a": {"k": 1, "k": 2}, "a": 3}',
    b'[{"a": 1, "a": 2}]',
    b'{"a": [1, {"b": 1, "b": 2}]}',
    b'{"A": 1, "a": 2}',
    b'{"a": "\\ud800"}',
    b'{"\\ud800": 1}',
    b'{"a": "\\ud83d\\ude00"}',
    b'{"a": "x\x01"}',
    b'{"a": "x\x7f"}',
    b"{'a': 1}",
    # Spark's parser reads one value and ignores what follows it; so does the Python form
    b'{"a": 1} x',
    OBJECT + b",",
    b'{"a": true} {"b": 1}',
    b"[1]\xef\xbb\xbf",
    b'{"a": 1, "a": 2} x',
    b"\n" + OBJECT + b"\n",
    b"\xff",
    b'{"event_id": "e\xff"}',
    b"  \xc0\xaf",
    b"\xed\xa0\x80",
    b"\xe2\x82",
    b'{"a": "\xe2\x82"}',
    b"\xf4\x90\x80\x80",
    *read_as_the_log_does(b'{"a": "' + b"x" * 2000 + b'"}', 1024),
    *read_as_the_log_does(b'{"a": "' + "\u20ac".encode() * 400 + b'"}', 1024),  # cut inside a character
    *read_as_the_log_does(b'{"a": "' + "\u20ac".encode() * 400 + b'"}', 1023),
    *read_as_the_log_does(b'{"a": "' + b"\xff" * 2000 + b'"}', 1024),  # cut, and not UTF-8 either
]


def _verdicts(parsed: pa.Table) -> list[tuple]:
    """Per line: (reason, detail, raw_line) when a line check failed, else "fields" (the parser's own checks decide)."""
    rows = sorted(
        parsed.select(["line_number", "reject_reason", "reject_detail", "raw_line"]).to_pylist(),
        key=lambda r: r["line_number"],
    )
    return [
        (r["reject_reason"], r["reject_detail"], r["raw_line"]) if r["reject_reason"] in LINE_REASONS else "fields"
        for r in rows
    ]


def _arrow(lines: list) -> pa.Table:
    """The lines as ``lines.toArrow()`` gives them to the order stream: text unchecked, with ``line_bytes``."""
    pairs = [line if isinstance(line, tuple) else (line, len(line)) for line in lines]
    return pa.table(
        {
            "segment": [1] * len(pairs),
            "line_number": list(range(1, len(pairs) + 1)),
            "raw_line": pa.array([kept for kept, _ in pairs], pa.binary()).view(pa.string()),
            "line_bytes": [length for _, length in pairs],
        }
    )


def test_every_parser_checks_the_line_first_and_the_clock_last():
    for reasons in (ORDER_REASONS, PAGE_VIEW_REASONS):
        assert list(reasons)[: len(LINE_REASONS)] == list(LINE_REASONS) and list(reasons)[-1:] == list(CLOCK_REASONS)
        assert reasons == reject_reasons({k: v for k, v in reasons.items() if k not in reject_reasons({})})


def test_the_spark_and_the_python_form_decide_the_same(spark):
    spark_form = _verdicts(parse_page_views(raw_frame(spark, LINES)).toArrow())
    python_form = _verdicts(parse_order_lines(_arrow(LINES)))
    assert python_form == spark_form
    assert {verdict[0] for verdict in spark_form if verdict != "fields"} == set(
        LINE_REASONS
    )  # each check decides some line
    # the Python form run by Spark sees the very bytes the readers hand over
    assert _verdicts(parse_order_events(raw_frame(spark, LINES)).toArrow()) == python_form

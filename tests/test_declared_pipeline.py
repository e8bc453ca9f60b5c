"""A pipeline declared in the TOML file: its validation, its parse (Arrow and Spark) and ``lklab init``.

Hand-made inputs with their exact expected values: each refusal's message (the key named, the
valid values listed), each dead letter's reason and detail, exact decimals, a 5-line log parsed
to the Arrow table the jobs will take, the same lines through Spark, and the proposal ``lklab
init`` prints for a sample, loaded back.
"""

import copy
import subprocess
import tomllib
from decimal import Decimal

import pyarrow as pa
import pytest

from lklab.pipelines.declared.declaration import (
    Declaration,
    DeclarationError,
    FieldRule,
    Measure,
    declarations,
    load_declaration,
)
from lklab.pipelines.declared.parse import (
    REJECT_REASONS,
    parse_declared,
    parse_declared_line,
    parse_declared_lines,
    parsed_schema_of,
)
from shared.config import ConfigError, LabConfig, load_config
from shared.line_rows import UTC_MICROS
from shared.windows import SlidingWindows, TumblingWindows

METERS_TOML = """\
lake = "meters-lake"
max-clock-skew = "10m"

[pipelines.meter_kwh]
kind = "windowed"
event-id = "reading_id"
event-time = "read_at"
ingest-time = "received_at"
keys = ["meter", "region"]
window-kind = "tumbling"
window-size = "5m"
watermark-delay = "2m"

[pipelines.meter_kwh.measures]
kwh = "decimal(18,3)"
pulses = "long"

[pipelines.meter_kwh.fields.region]
values = ["north", "south"]

[pipelines.meter_kwh.fields.kwh]
min = 0
max = "1000"

[pipelines.running_max]
max-clock-skew = "1m"
"""
RAW = tomllib.loads(METERS_TOML)
T0 = 1_767_607_200_000_000  # 2026-01-05T10:00:00Z in microseconds


def meters(**defaults) -> Declaration:
    return declarations(RAW, LabConfig(**defaults))["meter_kwh"]


# ----------------------------------------------------------------------------- the declaration


def test_a_declared_section_is_validated_into_a_declaration(tmp_path):
    file = tmp_path / "lab.toml"
    file.write_text(METERS_TOML)
    declaration = load_declaration("meter_kwh", file, environ={})
    assert declaration == Declaration(
        name="meter_kwh",
        kind="windowed",
        event_id="reading_id",
        event_time="read_at",
        ingest_time="received_at",
        keys=("meter", "region"),
        measures=(Measure("kwh", "decimal", 18, 3), Measure("pulses", "long", 19, 0)),
        window=TumblingWindows(300_000_000),
        watermark_delay=120_000_000,
        watermark_interval=1_000_000,  # not declared: the lab's default
        allowed_lateness=0,
        dedup_horizon=3_600_000_000,
        heartbeat_interval=60_000_000,
        max_clock_skew=600_000_000,  # not declared: the file's top-level setting
        max_line_bytes=1 << 20,
        rules={"region": FieldRule(values=("north", "south")), "kwh": FieldRule(min=Decimal(0), max=Decimal(1000))},
    )
    assert [m.arrow_type for m in declaration.measures] == [pa.decimal128(18, 3), pa.int64()]


def test_the_files_settings_sections_keep_working_beside_a_declared_one(tmp_path):
    file = tmp_path / "lab.toml"
    file.write_text(METERS_TOML)
    assert load_config(file, {"pipeline": "running_max"}, environ={}).max_clock_skew == 60_000_000
    assert load_config(file, {}, environ={}).max_clock_skew == 600_000_000
    # naming the declared pipeline takes none of its keys as settings (the jobs will read the declaration)
    assert load_config(file, {}, environ={"LKLAB_PIPELINE": "meter_kwh"}).window_size == 60_000_000
    assert load_declaration("meter_kwh", file, environ={}).max_clock_skew == 600_000_000
    with pytest.raises(DeclarationError, match=r"pipeline 'meters' is not declared .*; declared: meter_kwh"):
        load_declaration("meters", file, environ={})


def _with(change) -> dict:
    raw = copy.deepcopy(RAW)
    change(raw["pipelines"]["meter_kwh"])
    return raw


def _set(key, value):
    return lambda section: section.__setitem__(key, value)


def _drop(key):
    return lambda section: section.pop(key)


VALID_KEYS = (
    "kind, event-id, event-time, keys, ingest-time, window-kind, window-size, window-slide, session-gap, "
    "watermark-delay, watermark-interval, allowed-lateness, dedup-horizon, heartbeat-interval, max-clock-skew, "
    "max-line-bytes, measures, fields"
)
REFUSALS = {
    "unknown key": (_set("window_size", "5m"), f"unknown key(s) window_size; valid keys: {VALID_KEYS}"),
    "unknown kind": (_set("kind", "running"), "kind: 'running' is not valid; valid: windowed"),
    "missing keys": (
        lambda s: (s.pop("event-id"), s.pop("keys")),
        "missing key(s) event-id, keys; a declared pipeline needs kind, event-id, event-time, keys",
    ),
    "measure type": (
        _set("measures", {"kwh": "float"}),
        'measures.kwh: \'float\' is not a measure type; valid: "long", "decimal(p,s)" with precision p 1..38 '
        "and scale s 0..p",
    ),
    "precision": (
        _set("measures", {"kwh": "decimal(39,2)"}),
        "measures.kwh: 'decimal(39,2)' is out of range; valid: precision 1..38 and scale 0..precision",
    ),
    "scale": (
        _set("measures", {"kwh": "decimal(4,5)"}),
        "measures.kwh: 'decimal(4,5)' is out of range; valid: precision 1..38 and scale 0..precision",
    ),
    "key also a measure": (
        _set("keys", ["meter", "kwh"]),
        "measures.kwh: field 'kwh' is already keys; valid: each field in one role",
    ),
    "key also the event id": (
        _set("keys", ["reading_id"]),
        "keys: field 'reading_id' is already event-id; valid: each field in one role",
    ),
    "key named twice": (
        _set("keys", ["meter", "meter"]),
        "keys: field 'meter' is already keys; valid: each field in one role",
    ),
    "no keys": (_set("keys", []), "keys: [] is not valid; valid: a non-empty list of field names"),
    "field name": (
        _set("event-time", "read at"),
        "event-time: 'read at' is not a field name; valid: letters, digits and _, not starting with a digit",
    ),
    "window": (_set("window-size", "5"), "window-size: '5' needs a unit; use e.g. 5s or 5m"),
    "window kind": (
        _set("window-kind", "hopping"),
        "window-kind: 'hopping' is not valid; valid: tumbling, sliding, session",
    ),
    "slide longer than the window": (
        lambda s: s.update({"window-kind": "sliding", "window-slide": "10m"}),
        "window-slide (10m) must not exceed window-size (5m): events between windows would belong to none",
    ),
    "stream setting": (_set("dedup-horizon", "soon"), "dedup-horizon: 'soon' is not a duration"),
    "a lab column": (
        _set("keys", ["meter", "window_start"]),
        "keys: 'window_start' is a column of the lab's own; valid: any other name (reserved: segment, line_number, "
        "line_bytes, raw_line, event_id, event_time, ingest_time, reject_reason, reject_detail, heartbeat, "
        "window_start, window_end, event_count, batch_id)",
    ),
    "ingest_time as a key": (_set("keys", ["ingest_time"]), "keys: 'ingest_time' is a column of the lab's own"),
    "event time in the ingest column": (
        _set("event-time", "ingest_time"),
        "event-time: 'ingest_time' is a column of the lab's own",
    ),
    "rule on no field": (
        _set("fields", {"site": {"values": ["a"]}}),
        "fields.site: 'site' is neither a key nor a measure; valid: meter, region, kwh, pulses",
    ),
    "rule key": (
        _set("fields", {"region": {"allowed": ["a"]}}),
        "fields.region: unknown key(s) allowed; valid keys: values, min, max",
    ),
    "min on a key": (
        _set("fields", {"meter": {"min": 1}}),
        "fields.meter: min and max are a measure's; valid for a key: values",
    ),
    "values on a measure": (
        _set("fields", {"kwh": {"values": ["1"]}}),
        "fields.kwh: values is a key's; valid for a measure: min, max",
    ),
    "min above max": (
        _set("fields", {"kwh": {"min": 5, "max": 1.5}}),
        "fields.kwh: min 5 is above max 1.5; valid: min <= max",
    ),
    "bound": (
        _set("fields", {"kwh": {"max": "lots"}}),
        "fields.kwh.max: 'lots' is not a number; valid: a TOML number or a decimal string",
    ),
}


@pytest.mark.parametrize("case", REFUSALS)
def test_everything_wrong_is_refused_naming_the_key_and_what_is_valid(case):
    change, message = REFUSALS[case]
    with pytest.raises(DeclarationError) as refused:
        declarations(_with(change))
    assert str(refused.value).startswith("[pipelines.meter_kwh] " + message), str(refused.value)
    assert isinstance(refused.value, ConfigError)


def test_the_other_window_kinds_and_a_missing_section_key_come_from_the_defaults():
    sliding = declarations(_with(lambda s: s.update({"window-kind": "sliding", "window-slide": "1m"})))["meter_kwh"]
    assert sliding.window == SlidingWindows(300_000_000, 60_000_000)
    assert declarations(_with(_drop("window-size")))["meter_kwh"].window == TumblingWindows(60_000_000)
    assert declarations(_with(_drop("ingest-time")))["meter_kwh"].ingest_time is None


# ----------------------------------------------------------------------------- the parse


def line(**fields) -> bytes:
    """A valid reading's line; keyword arguments override (a value of ``...`` removes the field)."""
    import json

    base = {
        "reading_id": "r-1",
        "meter": "m-1",
        "region": "north",
        "read_at": "2026-01-05T10:00:00Z",
        "received_at": "2026-01-05T10:00:02Z",
        "kwh": 12.345,
        "pulses": 7,
    }
    merged = {k: v for k, v in {**base, **fields}.items() if v is not ...}
    return json.dumps(merged).encode()


def rejection(raw: bytes, line_bytes: int | None = None, declaration: Declaration | None = None):
    row = parse_declared_line(declaration or meters(), raw, line_bytes)
    return row["reject_reason"], row.get("reject_detail")


DEAD_LETTERS = {
    "event id absent": (line(reading_id=...), ("missing_field", "reading_id")),
    "key null": (line(meter=None), ("missing_field", "meter")),
    "key blank": (line(meter=" "), ("missing_field", "meter")),
    "measure absent": (line(pulses=...), ("missing_field", "pulses")),
    "event time absent": (line(read_at=...), ("missing_field", "read_at")),
    "key a float": (line(meter=1.5), ("wrong_type", "meter")),
    "key a bool": (line(region=True), ("wrong_type", "region")),
    "event id an object": (line(reading_id={"n": 1}), ("wrong_type", "reading_id")),
    "event time a number": (line(read_at=1767607200), ("wrong_type", "read_at")),
    "measure a bool": (line(kwh=True), ("invalid_measure", "kwh")),
    "measure a word": (line(kwh="twelve"), ("invalid_measure", "kwh")),
    "measure an exponent in a string": (line(kwh="1e3"), ("invalid_measure", "kwh")),
    "measure with a plus": (line(pulses="+7"), ("invalid_measure", "pulses")),
    "too many decimals": (
        b'{"reading_id":"r-1","meter":"m-1","region":"north","read_at":"2026-01-05T10:00:00Z",'
        b'"kwh":12.3456,"pulses":7}',
        ("measure_out_of_range", "kwh"),
    ),
    "too many decimals as a string": (line(kwh="12.3456"), ("measure_out_of_range", "kwh")),
    "too many digits": (line(kwh="1000000000000000"), ("measure_out_of_range", "kwh")),
    "a fraction in a long": (line(pulses="7.5"), ("measure_out_of_range", "pulses")),
    "a long beyond 64 bits": (line(pulses=1 << 63), ("measure_out_of_range", "pulses")),
    "value not allowed": (line(region="east"), ("value_not_allowed", "region")),
    "below min": (line(kwh="-0.001"), ("below_min", "kwh")),
    "above max": (line(kwh="1000.001"), ("above_max", "kwh")),
    "event time without a zone": (line(read_at="2026-01-05T10:00:00"), ("invalid_event_time", "read_at")),
    "ingest time not a time": (line(received_at="yesterday"), ("invalid_ingest_time", "received_at")),
    "ingest time a number": (line(received_at=5), ("invalid_ingest_time", "received_at")),
    "event time in the future": (
        line(read_at="2026-01-05T10:20:00Z"),
        (
            "event_time_in_future",
            "event_time 2026-01-05T10:20:00Z is more than 5m (max-clock-skew) ahead of ingest_time "
            "2026-01-05T10:00:02Z",
        ),
    ),
    "the log's stamp when the declared field is absent": (
        line(received_at=..., ingest_time="2026-01-05T09:00:00Z"),
        (
            "event_time_in_future",
            "event_time 2026-01-05T10:00:00Z is more than 5m (max-clock-skew) ahead of ingest_time "
            "2026-01-05T09:00:00Z",
        ),
    ),
    "the log's stamp not a time": (line(received_at=..., ingest_time="soon"), ("invalid_ingest_time", "ingest_time")),
    "a byte order mark": (b"\xef\xbb\xbf" + line(), ("not_json", None)),
    "not UTF-8": (b'{"reading_id": "\xff"}', ("invalid_utf8", "raw_line holds the line's 19 bytes in base64")),
    "not JSON": (b'{"reading_id": ', ("not_json", None)),
    "a repeated key": (b'{"meter": "m-1", "meter": "m-2"}', ("duplicate_key", "meter")),
    "not an object": (b"[1, 2]", ("not_an_object", None)),
    "blank": (b"   ", ("empty_line", None)),
}


@pytest.mark.parametrize("case", DEAD_LETTERS)
def test_each_dead_letter_has_its_reason_and_detail(case):
    raw, expected = DEAD_LETTERS[case]
    assert rejection(raw) == expected


def test_a_cut_line_is_too_long_before_anything_else():
    assert rejection(line()[:40], line_bytes=2_000_000) == ("line_too_long", "2000000 bytes")


def test_every_reason_is_documented_once_in_the_order_checked():
    own = ["invalid_measure", "measure_out_of_range", "value_not_allowed", "below_min", "above_max"]
    names = list(REJECT_REASONS)
    assert names[names.index("wrong_type") + 1 : names.index("invalid_event_time")] == own
    assert {reason for _, (reason, _) in DEAD_LETTERS.values()} | {"line_too_long"} == set(names)


@pytest.mark.parametrize(
    "kwh, pulses, held",
    [
        ("12.345", 7, (Decimal("12.345"), 7)),
        ("12.3450", 7, (Decimal("12.345"), 7)),  # judged by its value: a trailing zero is no decimal
        ("0.000", "0", (Decimal("0.000"), 0)),
        ("-0", "12.000", (Decimal("0.000"), 12)),  # -0 is 0, not below min 0; 12.000 is a whole number
    ],
)
def test_decimals_are_exact(kwh, pulses, held):
    row = parse_declared_line(meters(), line(kwh=kwh, pulses=pulses), None)
    assert row["reject_reason"] is None
    assert (row["kwh"], row["pulses"]) == held


def test_json_numbers_are_read_from_their_digits_not_as_floats():
    text = b'{"reading_id":"r-1","meter":"m-1","region":"north","read_at":"2026-01-05T10:00:00Z","kwh":%s,"pulses":%s}'
    row = parse_declared_line(meters(), text % (b"0.1", b"1e3"), None)
    assert (row["kwh"], row["pulses"]) == (Decimal("0.100"), 1000)  # 1e3 is the whole number 1000
    row = parse_declared_line(meters(), text % (b"9.99e2", b"12.0"), None)
    assert (row["kwh"], row["pulses"]) == (Decimal("999.000"), 12)
    assert parse_declared_line(meters(), text % (b"1e-4", b"1"), None)["reject_reason"] == "measure_out_of_range"
    wide = declarations(_with(lambda s: s.update(measures={"kwh": "decimal(38,2)"}, fields={})))["meter_kwh"]
    big = b"123456789012345678901234567890123456.78"
    assert parse_declared_line(wide, text % (big, b"1"), None)["kwh"] == Decimal(big.decode())


def test_a_number_key_is_kept_as_its_digits():
    row = parse_declared_line(meters(), line(meter=42, reading_id=7), None)
    assert (row["event_id"], row["meter"]) == ("7", "42")


def test_a_heartbeat_carries_no_event():
    row = parse_declared_line(meters(), b'{"heartbeat": true, "ingest_time": "2026-01-05T10:00:00Z"}', None)
    assert row == {"ingest_time": T0, "reject_reason": None, "reject_detail": None, "heartbeat": True}
    assert rejection(b'{"heartbeat": true}') == ("missing_field", "ingest_time")


FIVE_LINES = [
    line(),
    line(reading_id="r-2", meter="m-2", region="south", kwh="0.5", pulses=3, received_at=...),
    line(reading_id="r-3", kwh="12.3456"),
    b'{"heartbeat": true, "ingest_time": "2026-01-05T10:01:00Z"}',
    b"\xff\xfe",
]


def raw_lines(lines: list[bytes]) -> pa.Table:
    return pa.table(
        {
            "segment": pa.array([0] * len(lines), pa.int64()),
            "line_number": pa.array(range(len(lines)), pa.int64()),
            "raw_line": pa.array(lines, pa.binary()).view(pa.string()),  # the bytes as read, UTF-8 or not
            "line_bytes": pa.array([len(raw) for raw in lines], pa.int64()),
        }
    )


def test_the_parsed_table_of_five_lines():
    parsed = parse_declared_lines(meters(), raw_lines(FIVE_LINES))
    assert parsed.schema == parsed_schema_of(meters())
    assert [(f.name, f.type) for f in parsed.schema] == [
        ("segment", pa.int64()),
        ("line_number", pa.int64()),
        ("event_id", pa.string()),
        ("meter", pa.string()),
        ("region", pa.string()),
        ("kwh", pa.decimal128(18, 3)),
        ("pulses", pa.int64()),
        ("event_time", UTC_MICROS),
        ("ingest_time", UTC_MICROS),
        ("raw_line", pa.string()),
        ("reject_reason", pa.string()),
        ("reject_detail", pa.string()),
        ("heartbeat", pa.bool_()),
    ]
    rows = parsed.drop_columns(["segment", "raw_line"]).to_pylist()
    from datetime import UTC, datetime

    at = lambda seconds: datetime.fromtimestamp(seconds, UTC)  # noqa: E731
    assert rows == [
        dict(
            line_number=0,
            event_id="r-1",
            meter="m-1",
            region="north",
            kwh=Decimal("12.345"),
            pulses=7,
            event_time=at(1767607200),
            ingest_time=at(1767607202),
            reject_reason=None,
            reject_detail=None,
            heartbeat=False,
        ),
        # no received_at and no stamp: no ingest time, no clock check
        dict(
            line_number=1,
            event_id="r-2",
            meter="m-2",
            region="south",
            kwh=Decimal("0.500"),
            pulses=3,
            event_time=at(1767607200),
            ingest_time=None,
            reject_reason=None,
            reject_detail=None,
            heartbeat=False,
        ),
        dict(
            line_number=2,
            event_id=None,
            meter=None,
            region=None,
            kwh=None,
            pulses=None,
            event_time=None,
            ingest_time=None,
            reject_reason="measure_out_of_range",
            reject_detail="kwh",
            heartbeat=False,
        ),
        dict(
            line_number=3,
            event_id=None,
            meter=None,
            region=None,
            kwh=None,
            pulses=None,
            event_time=None,
            ingest_time=at(1767607260),
            reject_reason=None,
            reject_detail=None,
            heartbeat=True,
        ),
        dict(
            line_number=4,
            event_id=None,
            meter=None,
            region=None,
            kwh=None,
            pulses=None,
            event_time=None,
            ingest_time=None,
            reject_reason="invalid_utf8",
            reject_detail="raw_line holds the line's 2 bytes in base64",
            heartbeat=False,
        ),
    ]
    assert parsed["raw_line"].to_pylist()[4] == "//4="  # the bytes that are not UTF-8, in base64


def test_spark_parses_the_same_lines_alike(spark):
    raw = spark.createDataFrame(raw_lines(FIVE_LINES))
    in_spark = parse_declared(raw, meters()).orderBy("line_number").toArrow()
    in_python = parse_declared_lines(meters(), raw_lines(FIVE_LINES))
    assert in_spark.cast(in_python.schema).to_pylist() == in_python.to_pylist()


# ----------------------------------------------------------------------------- lklab init and the command line

SAMPLE = b"""\
{"reading_id": "r-1", "meter": "m-1", "region": "north", "read_at": "2026-01-05T10:00:00Z", "received_at": "2026-01-05T10:00:02Z", "kwh": 1.25, "pulses": 12, "note": "a"}
{"reading_id": "r-2", "meter": "m-2", "region": "south", "read_at": "2026-01-05T10:01:00Z", "received_at": "2026-01-05T10:01:01Z", "kwh": 0.5, "pulses": 3, "note": "b"}
{"reading_id": "r-3", "meter": "m-1", "region": "north", "read_at": "2026-01-05T10:02:00+01:00", "received_at": "2026-01-05T09:02:03Z", "kwh": 2.125, "pulses": 7, "note": "c"}
{"heartbeat": true, "ingest_time": "2026-01-05T10:03:00Z"}
{"reading_id": "r-4", "meter": "m-2", "region": "south", "read_at": "2026-01-05T10:04:00Z", "received_at": "2026-01-05T10:04:00Z", "kwh": 3, "pulses": 0, "note": "d"}
{"reading_id": "r-5", "meter": "m-1", "region": "north", "read_at": "2026-01-05T10:05:00Z", "received_at": "2026-01-05T10:05:09Z", "kwh": 0.010, "pulses": 1, "note": "e"}
"""
PROPOSAL = """\
# Proposed by lklab init from 5 line(s) of meters.jsonl (1 other line(s) skipped: not a JSON object, or a heartbeat).
# Every value below is a guess: check each one against what your events mean.
[pipelines.meter_kwh]
kind = "windowed"
# the first id-like field whose 5 values are all different: check it names one event, resends included
event-id = "reading_id"
# when the event happened: check it is not when it was sent or received
event-time = "read_at"
# another time field, taken as when the event arrived: check it, or delete the line
ingest-time = "received_at"
# string fields with few values: the counts and sums are per combination of these
keys = ["meter", "region"]
# the lab's default windows: choose yours (tumbling | sliding with window-slide | session with session-gap)
window-kind = "tumbling"
window-size = "1m"
watermark-delay = "1m"

[pipelines.meter_kwh.measures]
# at most 3 decimal(s) in the sample: raise the scale if more can come
kwh = "decimal(18,3)"
# whole numbers only in the sample: summed as a 64-bit integer
pulses = "long"

[pipelines.meter_kwh.fields.meter]
# the values seen in the sample: uncomment to make any other value a dead letter
# values = ["m-1", "m-2"]

[pipelines.meter_kwh.fields.region]
# the values seen in the sample: uncomment to make any other value a dead letter
# values = ["north", "south"]

# not proposed (none of the roles above fits them): note
"""


def lklab_here(*args: str) -> subprocess.CompletedProcess:
    """``lklab ARGS`` as ``lklab.cli.main`` in this process: its exit code, stdout and stderr."""
    import contextlib
    import io

    from lklab.cli import main
    from tests.conftest import cli_in_this_process

    out, err = io.StringIO(), io.StringIO()
    with cli_in_this_process(), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(args))
    return subprocess.CompletedProcess(["lklab", *args], code, out.getvalue(), err.getvalue())


def test_init_proposes_a_declaration_that_loads_back(tmp_path):
    sample = tmp_path / "meters.jsonl"
    sample.write_bytes(SAMPLE)
    printed = lklab_here("init", "--pipeline", "meter_kwh", "--sample", str(sample))
    assert (printed.returncode, printed.stdout) == (0, PROPOSAL)
    proposed = declarations(tomllib.loads(printed.stdout))["meter_kwh"]
    assert (proposed.keys, proposed.measures) == (
        ("meter", "region"),
        (Measure("kwh", "decimal", 18, 3), Measure("pulses", "long", 19, 0)),
    )
    out = tmp_path / "meters.toml"
    assert lklab_here("init", "--pipeline", "meter_kwh", "--sample", str(sample), "--config", str(out)).returncode == 0
    assert out.read_text() == PROPOSAL
    again = lklab_here("init", "--pipeline", "meter_kwh", "--sample", str(sample), "--config", str(out))
    assert again.returncode == 2
    assert f"--config: {out} exists; the proposal is written only to a new file" in again.stderr


def test_init_refuses_a_sample_it_cannot_guess_from(tmp_path):
    sample = tmp_path / "no-id.jsonl"
    sample.write_text('{"meter": "m-1", "read_at": "2026-01-05T10:00:00Z"}\n')
    refused = lklab_here("init", "--pipeline", "x", "--sample", str(sample))
    assert refused.returncode == 2
    assert "no field named like an id holds a different value on every line: write event-id yourself" in refused.stderr


def test_a_bad_declaration_stops_any_command_with_exit_2_naming_the_key(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text(METERS_TOML.replace('kwh = "decimal(18,3)"', 'kwh = "decimal(18;3)"'))
    refused = lklab_here("generate", "--config", str(bad), "--lake", str(tmp_path / "lake"))
    assert refused.returncode == 2
    assert refused.stderr == (
        "lklab generate: [pipelines.meter_kwh] measures.kwh: 'decimal(18;3)' is not a measure type; "
        'valid: "long", "decimal(p,s)" with precision p 1..38 and scale s 0..p\n'
    )
    assert not (tmp_path / "lake").exists()


def test_an_ingest_time_declared_under_the_logs_own_name_is_read_from_the_line():
    """``ingest-time = "ingest_time"``: the field the log stamps is the declared one."""
    own = declarations(_with(lambda s: s.update({"ingest-time": "ingest_time"})))["meter_kwh"]
    row = parse_declared_line(own, line(received_at=..., ingest_time="2026-01-05T10:00:02Z"), None)
    assert (row["reject_reason"], row["ingest_time"]) == (None, 1767607202000000)
    assert rejection(line(received_at=..., ingest_time="soon"), declaration=own) == (
        "invalid_ingest_time",
        "ingest_time",
    )

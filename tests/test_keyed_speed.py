"""The speed layer's step on the executors (``speed-step = executors``): the driver step's rows.

``shared.keyed_speed`` runs the clock, dedup and windows as Spark stateful operators, their
state in RocksDB. On a generated log with duplicates, dead letters and late events, under
sliding windows with an allowed lateness and under session windows, ``lklab speed`` with its
step on the executors writes every table the step on the driver writes, row for row, at one
segment per micro-batch and at several; stopped half way and started again over the rest of
the log, it writes the same rows again (its state comes back from the query's checkpoint), and
so it does after SIGKILLs between a micro-batch's commits. A lake whose tables one step wrote is
refused to the other, naming the checkpoint that wrote them.
The buckets that place ids and accounts in the operators' groups are FNV-1a, the same in every
process, and the Arrow cells between the operators keep every type exactly.
"""

from __future__ import annotations

import shutil
import signal
from datetime import UTC, datetime
from decimal import Decimal

import pyarrow as pa
import pytest

from lklab.pipelines.billing_windows.agreement import BOOKKEEPING, metric_totals, row_counts
from lklab.pipelines.billing_windows.generator import GeneratorParams, generate
from lklab.pipelines.billing_windows.speed import SPEED_TABLES, run_speed
from shared.arrow_blobs import decode, encode
from shared.buckets import buckets, key_buckets
from shared.config import load_config
from shared.eventlog import EventLog
from shared.micro_batch import TIMING_COLUMNS
from shared.tables import Tables

SECOND = 1_000_000
PROVIDER = "spark.sql.streaming.stateStore.providerClass"
WINDOWS = {
    "sliding": {"window-kind": "sliding", "window-size": "2m", "window-slide": "30s", "allowed-lateness": "1m"},
    "session": {"window-kind": "session", "session-gap": "90s"},
}


def test_a_bucket_is_the_fnv1a_hash_of_the_key_bytes():
    """Published FNV-1a 64-bit values: "" 0xcbf29ce484222325, "a" 0xaf63dc4c8601ec8c, "foobar"
    0x85944171f73967e8; a null key is the empty string; "é" is its two UTF-8 bytes (c3 a9, the
    definition applied by hand: 0x0ac21707b7181e01); several columns join with \\x1f."""
    keys = pa.array(["", "a", "foobar", None, "é"])
    expected = [0xCBF29CE484222325, 0xAF63DC4C8601EC8C, 0x85944171F73967E8, 0xCBF29CE484222325, 0x0AC21707B7181E01]
    assert buckets(keys, 1 << 62).tolist() == [h % (1 << 62) for h in expected]
    assert buckets(keys, 7).tolist() == [h % 7 for h in expected]
    assert buckets(pa.chunked_array([["a"], ["foobar"]]), 7).tolist() == [expected[1] % 7, expected[2] % 7]
    table = pa.table({"account_id": ["a", "a"], "currency": ["b", None]})
    assert (
        key_buckets(table, ["account_id", "currency"], 1000).tolist()
        == buckets(pa.array(["a\x1fb", "a\x1f"]), 1000).tolist()
    )
    with pytest.raises(ValueError, match="at least 1"):
        buckets(keys, 0)


def test_a_cell_carries_a_table_with_its_exact_types():
    table = pa.table(
        {
            "amount": pa.array([Decimal("12.345678"), None], pa.decimal128(20, 6)),
            "event_time": pa.array([datetime(2026, 1, 5, 0, 0, 0, 1, tzinfo=UTC), None], pa.timestamp("us", tz="UTC")),
            "segment": pa.array([1, 2], pa.int64()),
        }
    ).replace_schema_metadata({"after": "7"})
    assert decode(encode(table)).equals(table, check_metadata=True)
    assert decode(encode(table.schema.empty_table())).schema == table.schema


@pytest.fixture(scope="module")
def log(tmp_path_factory):
    """A generated log: 600 events over 6 segments, with retries, malformed lines and late ones."""
    lake = tmp_path_factory.mktemp("keyed") / "log-only"
    params = GeneratorParams(
        scenario="billing",
        events=600,
        accounts=4,
        span=3600 * SECOND,
        duplicate_rate=0.04,
        malformed_rate=0.01,
        segment_interval=10 * 60 * SECOND,
        seed=11,
    )
    generate(params, lake)
    return lake


def _lake(log, to, segments: range | None = None):
    """A lake holding ``log``'s ``segments`` (all: None), as published there."""
    (to / "log").mkdir(parents=True, exist_ok=True)
    source = EventLog(log)
    for number in segments or range(1, source.last_segment() + 1):
        path = source.segment_path(number)
        shutil.copy2(path, to / "log" / path.name)
    return to


def _speed(spark, lake, step: str, windows: str, per_batch: int):
    config = load_config(
        None, {"lake": str(lake), "table-engine": "deltalake", "speed-step": step, **WINDOWS[windows]}, environ={}
    )
    return run_speed(spark, config, available_now=True, segments_per_batch=per_batch)


def _tables(spark, lake) -> dict[str, pa.Table]:
    tables = Tables(spark, lake, "deltalake")
    return {name: tables.read_arrow(name) for name in SPEED_TABLES}


@pytest.fixture(scope="module")
def driver_rows(spark, log, tmp_path_factory) -> dict[str, pa.Table]:
    """The driver step's tables of ``log``, sliding windows, one segment per micro-batch."""
    lake = _lake(log, tmp_path_factory.mktemp("driver"))
    _speed(spark, lake, "driver", "sliding", 1)
    return _tables(spark, lake)


def _same(left: dict, right: dict, ignore) -> None:
    """Every table's rows and types (``ignore``: columns that may differ); with other cuts, the
    metrics' totals."""
    for name in SPEED_TABLES:
        assert left[name].schema == right[name].schema, name
        if name == "stream_metrics" and ignore is BOOKKEEPING:
            assert metric_totals(left[name]) == metric_totals(right[name])
        else:
            assert row_counts(left[name], ignore) == row_counts(right[name], ignore), name


@pytest.mark.slow
def test_the_step_on_the_executors_writes_the_drivers_rows_at_any_batch_size_and_after_a_stop(
    spark, log, tmp_path, driver_rows
):
    """One segment per micro-batch, the log's second half read by a new query over the first
    half's checkpoint (the remembered copies and held windows come back from the state store: a
    state read from the tables instead, or none, would count the second half's retries anew);
    and five segments per micro-batch in one go."""
    before = spark.conf.get(PROVIDER, None)
    last = EventLog(log).last_segment()
    halves = _lake(log, tmp_path / "halves", range(1, last // 2 + 1))
    first = _speed(spark, halves, "executors", "sliding", 1)
    _lake(log, halves, range(last // 2 + 1, last + 1))
    second = _speed(spark, halves, "executors", "sliding", 1)
    assert (first.batches, second.batches) == (last // 2, last - last // 2)
    coarse = _lake(log, tmp_path / "coarse")
    assert _speed(spark, coarse, "executors", "sliding", 5).batches == -(-last // 5)
    expected = driver_rows
    assert (
        expected["late_events"].num_rows and expected["duplicate_events"].num_rows and expected["dead_letter"].num_rows
    )
    _same(_tables(spark, halves), expected, TIMING_COLUMNS)  # the same micro-batches: all but the timings
    _same(_tables(spark, coarse), expected, BOOKKEEPING)
    assert spark.conf.get(PROVIDER, None) == before  # the provider was the keyed query's alone


@pytest.mark.slow
def test_session_windows_on_the_executors_are_the_drivers(spark, log, tmp_path):
    """Sessions merge and their rows are deleted and replaced: the windows step's other path."""
    lakes = {step: _lake(log, tmp_path / step) for step in ("driver", "executors")}
    for step, lake in lakes.items():
        _speed(spark, lake, step, "session", 2)
    _same(_tables(spark, lakes["executors"]), _tables(spark, lakes["driver"]), TIMING_COLUMNS)


@pytest.mark.slow
@pytest.mark.parametrize(("wrote", "asked"), [("driver", "executors"), ("executors", "driver")])
def test_tables_one_step_wrote_are_refused_to_the_other_naming_its_checkpoint(
    spark, log, tmp_path, capsys, wrote, asked
):
    """By ``lklab speed`` before Spark starts (exit 2, one line), and by the runner itself."""
    from lklab.cli import main

    lake = _lake(log, tmp_path / "lake", range(1, 2))
    _speed(spark, lake, wrote, "sliding", 1)
    capsys.readouterr()
    assert main(["speed", "--available-now", "--speed-step", asked, "--lake", str(lake)]) == 2
    checkpoint = lake.resolve() / "checkpoints" / {"driver": "speed", "executors": "speed-on-executors"}[wrote]
    assert capsys.readouterr().err.strip() == (
        f"lklab speed: speed-step {asked}: the speed layer's tables under {lake.resolve()} were written with "
        f"speed-step {wrote} (its checkpoint is {checkpoint}); go on with --speed-step {wrote}, or start over on "
        "a fresh lake"
    )
    with pytest.raises(RuntimeError, match=r"already holds batches of 'speed' but its checkpoint .* is missing"):
        _speed(spark, lake, asked, "sliding", 1)


@pytest.mark.slow
def test_killed_at_a_commit_and_started_again_it_writes_an_uninterrupted_runs_rows(
    spark, log, tmp_path, monkeypatch, driver_rows
):
    """``lklab speed --available-now`` with its step on the executors, SIGKILLed with its JVM
    after micro-batch 1's state landed but before Spark's checkpoint recorded the batch (Spark
    runs it again from the state store's version before it, every commit is found done, and its
    operators' state must still commit), then run to the end: the driver step's rows. (The other
    crash points are the sink's, the driver step's tests walk them: ``tests/test_exactly_once.py``.)"""
    from tests.test_exactly_once import speed

    lake = _lake(log, tmp_path / "killed")
    monkeypatch.setenv("LKLAB_SPEED_STEP", "executors")
    for key, value in WINDOWS["sliding"].items():
        monkeypatch.setenv(f"LKLAB_{key.upper().replace('-', '_')}", value)
    assert speed(lake, crash_at="1:after:stream_state") == -signal.SIGKILL
    _speed(spark, lake, "executors", "sliding", 1)
    _same(_tables(spark, lake), driver_rows, TIMING_COLUMNS)

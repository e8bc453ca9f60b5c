"""The order_payments jobs on one small generated log: the stream whatever its micro-batches,
restarts and SIGKILLs mid-batch, the replay, the batch truth against the oracle, the
reconciliation (one moment of each side, the settings both recorded) and the CLI. Then a quiet
log: the always-on stream's heartbeat makes its unpaid orders and orphans final."""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import shutil
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from lklab.pipelines.order_payments.tables import (
    PAYMENTS_BATCH_DEAD_LETTER,
    PAYMENTS_DEAD_LETTER,
    PAYMENTS_LATE_EVENTS,
    PAYMENTS_MATCHED,
    PAYMENTS_STATE,
    PAYMENTS_STREAM_METRICS,
    PAYMENTS_TABLES,
    PAYMENTS_TRUTH_MATCHED,
    PAYMENTS_TRUTH_ORPHANS,
    PAYMENTS_TRUTH_UNPAID,
    PAYMENTS_UNPAID,
)
from shared import catalog
from shared.config import LabConfig
from shared.durations import parse_duration
from shared.micro_batch import TIMING_COLUMNS

MINUTE = 60_000_000
PARAMS = dict(orders=150, seed=7, span=120 * MINUTE, segment_interval=10 * MINUTE, malformed_rate=0.01, retry_rate=0.05)
STREAM_TABLES = [t for t in PAYMENTS_TABLES if t is not PAYMENTS_STREAM_METRICS]


@pytest.fixture(scope="module")
def log_lake(tmp_path_factory):
    from lklab.pipelines.order_payments.generator import OrderPaymentParams, generate_order_payments

    lake = tmp_path_factory.mktemp("payments") / "template"
    generate_order_payments(OrderPaymentParams(**PARAMS), lake)
    return lake


def config_for(lake) -> LabConfig:
    return LabConfig(lake=lake, table_engine="deltalake")


def rows(lake, prefix: str = "", *, batch_ids: bool = False) -> dict:
    """Every stream table's rows, order-free (without ``batch_id`` unless asked)."""
    from shared.tables import Tables

    tables, found = Tables(None, lake, "deltalake"), {}
    for table in STREAM_TABLES:
        got = tables.read_arrow(table.at(prefix))
        if not batch_ids and "batch_id" in got.column_names:
            got = got.drop_columns(["batch_id"])
        found[table.name] = sorted(map(str, got.to_pylist()))
    return found


LATENESS = "30m"
LATE_LIVE, LATE_REPLAY = catalog.replay_prefix(f"live-l{LATENESS}"), catalog.replay_prefix(f"r1-l{LATENESS}")


@pytest.fixture(scope="module")
def streamed(spark, log_lake, tmp_path_factory):
    """The log streamed one segment per batch (then replayed there), and five per batch elsewhere;
    with allowed lateness ``LATENESS``, streamed live five segments per batch and replayed."""
    from lklab.pipelines.order_payments.stream import PAYMENTS_RULE, run_payments_speed
    from lklab.replay_runner import replay_on_executors

    one, many = (shutil.copytree(log_lake, tmp_path_factory.mktemp("payments") / name) for name in ("one", "many"))
    run_payments_speed(spark, config_for(one), available_now=True, segments_per_batch=1)
    run_payments_speed(spark, config_for(many), available_now=True, segments_per_batch=5)
    replay_on_executors(spark, config_for(one), PAYMENTS_RULE, "r1")
    late_config = dataclasses.replace(config_for(one), allowed_lateness=parse_duration(LATENESS))
    run_payments_speed(spark, late_config, available_now=True, segments_per_batch=5, prefix=LATE_LIVE)
    replay_on_executors(spark, late_config, PAYMENTS_RULE, f"r1-l{LATENESS}")
    return one, many


def test_the_stream_writes_the_same_rows_whatever_the_segments_per_batch(streamed):
    one, many = streamed
    found = rows(one)
    assert found == rows(many)
    assert (
        found["payments_matched"]
        and found["payments_late_events"]
        and found["payments_duplicates"]
        and found["payments_dead_letter"]
    )


def test_the_replay_writes_the_live_rows_one_segment_per_batch_batch_ids_included(streamed):
    one, _ = streamed
    assert rows(one, catalog.replay_prefix("r1"), batch_ids=True) == rows(one, batch_ids=True)


def test_with_allowed_lateness_the_replay_writes_the_live_rows_and_fewer_events_are_late(streamed):
    from shared.table_settings import recorded
    from shared.tables import Tables

    one, _ = streamed
    tables = Tables(None, one, "deltalake")
    assert rows(one, LATE_REPLAY) == rows(one, LATE_LIVE)  # batch ids aside: the live run read five segments a batch

    def lines(table: catalog.Table, prefix: str, side: str = "") -> set:
        found = tables.read_arrow(table.at(prefix))
        return set(zip(found[f"{side}segment"].to_pylist(), found[f"{side}line_number"].to_pylist()))

    # every event late with the lateness is late without it; some the lateness let in joined
    assert lines(PAYMENTS_LATE_EVENTS, LATE_LIVE) < lines(PAYMENTS_LATE_EVENTS, "")
    absorbed = lines(PAYMENTS_LATE_EVENTS, "") - lines(PAYMENTS_LATE_EVENTS, LATE_LIVE)
    assert absorbed & lines(PAYMENTS_MATCHED, LATE_LIVE, "payment_")
    assert recorded(tables, PAYMENTS_MATCHED.at(LATE_LIVE))["allowed-lateness"] == LATENESS


def test_a_restart_after_half_the_log_gives_the_same_rows(spark, streamed, log_lake, tmp_path):
    from lklab.pipelines.order_payments.stream import run_payments_speed

    lake = shutil.copytree(log_lake, tmp_path / "restart")
    segments = sorted((lake / "log").glob("segment-*.jsonl"))
    held = tmp_path / "held"
    held.mkdir()
    for path in segments[len(segments) // 2 :]:
        path.rename(held / path.name)
    run_payments_speed(spark, config_for(lake), available_now=True, segments_per_batch=2)
    for path in held.iterdir():
        path.rename(lake / "log" / path.name)
    run_payments_speed(spark, config_for(lake), available_now=True, segments_per_batch=2)
    assert rows(lake) == rows(streamed[0])


@pytest.fixture(scope="module")
def with_truth(spark, streamed):
    from lklab.pipelines.order_payments.batch import run_payments_batch

    one, _ = streamed
    return one, run_payments_batch(spark, config_for(one))


def test_the_batch_truth_equals_the_oracle_and_conserves_every_line(with_truth):
    from lklab.pipelines.order_payments.generator import load_order_payments
    from lklab.pipelines.order_payments.truth import join_truth
    from shared.tables import Tables

    lake, run = with_truth
    oracle = join_truth(load_order_payments(lake), config_for(lake).join_bound)
    tables = Tables(None, lake, "deltalake")
    matched = tables.read_arrow(PAYMENTS_TRUTH_MATCHED.name)
    assert set(zip(matched["order_event_id"].to_pylist(), matched["payment_event_id"].to_pylist())) == oracle.matched
    assert set(tables.read_arrow(PAYMENTS_TRUTH_UNPAID.name)["event_id"].to_pylist()) == oracle.unpaid
    assert set(tables.read_arrow(PAYMENTS_TRUTH_ORPHANS.name)["event_id"].to_pylist()) == oracle.orphans
    assert run.conserved and run.duplicates > 0 and run.dead_letters > 0


@pytest.mark.parametrize("against", ["speed", "kappa:r1"])
def test_reconcile_explains_every_difference_and_audits_unpaid_orders_and_late_payments(spark, with_truth, against):
    from lklab.pipelines.order_payments.reconcile import reconcile_payments
    from shared.tables import Tables

    lake, _ = with_truth
    found = reconcile_payments(spark, config_for(lake), against=against, run=against.replace(":", "-"))
    assert found.result.differences and found.result.unexplained == 0
    assert found.truth_segment == found.stream_segment == len(list((lake / "log").glob("segment-*.jsonl")))
    tables = Tables(None, lake, "deltalake")
    unpaid = tables.read_arrow(PAYMENTS_UNPAID.name)
    late = tables.read_arrow(PAYMENTS_LATE_EVENTS.name)
    expected = sorted(
        [("unpaid_order", e) for e in unpaid["event_id"].to_pylist()]
        + [("late_payment", e) for e in late.filter(pc.equal(late["kind"], "payment"))["event_id"].to_pylist()]
    )
    audited = sorted((r["record"], r["event_id"]) for r in csv.DictReader(io.StringIO(found.audit_csv.read_text())))
    assert audited == expected and len(audited) == found.audit_rows > 0
    assert found.audit_csv.parent.name == f"payments-{against.replace(':', '-')}"


@pytest.mark.slow
def test_the_cli_end_to_end(spark, tmp_path, lklab_here):
    """Each command is ``lklab.cli.main`` called here, in the tests' Spark session (``lklab_here``):
    the commands' output and exit codes, not a process start, are checked (the crash test below
    runs ``lklab speed`` processes of this pipeline)."""
    from tests.processes import REPO

    lake = tmp_path / "lake"
    common = ["--lake", str(lake), "--pipeline", "order_payments"]
    steps = [
        ["generate", "--events", "150", "--span", "2h", "--segment-interval", "10m"],
        ["speed", "--available-now", "--segments-per-batch", "4"],
        ["batch"],
        ["reconcile"],
    ]
    outputs = []
    for step in steps:
        done = lklab_here(*step, *common, cwd=REPO, env={"LKLAB_TABLE_ENGINE": "deltalake"})
        assert done.returncode == 0, f"{step} exited {done.returncode}:\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}"
        outputs.append(done.stdout)
    assert "conserved" in outputs[2] and "(agrees)" in outputs[2]
    assert "finance audit:" in outputs[3] and "unexplained" not in outputs[3]


def committed(lake) -> dict:
    """Every table the stream commits, its metrics (durations aside) and state included, batch ids kept, order-free."""
    from shared.tables import Tables

    tables, found = Tables(None, lake, "deltalake"), {}
    for table in PAYMENTS_TABLES:
        got = tables.read_arrow(table.name)
        if table is PAYMENTS_STREAM_METRICS:
            got = got.drop_columns(sorted(TIMING_COLUMNS))
        found[table.name] = sorted(map(str, got.to_pylist()))
    return found


@pytest.mark.slow
def test_sigkill_at_named_points_then_a_restart_commits_the_rows_of_an_uninterrupted_run(spark, tmp_path):
    """One process killed at each crash point of batch 1 in turn (each goes on from the one
    before: batch 1 is replayed after every kill), then a clean run: every committed table equals
    an uninterrupted run's, batch ids and all. 17 points; each is a JVM start, so the last and one
    drawn at random (the first, before the batch writes, is every pipeline's: ``tests/crash_runs.py``).

    A payment matches up to 5 s after its order, the watermark trails 5 s. Batch 1 (segment 2)
    writes a row to every table: W = 12 - 5 = 7 for its lines and W* = 7 after them, so p1 (11 s)
    matches o1 (10 s), pC (5 s) is late, o0's interval [0, 5] and pY's [1, 6] close (unpaid,
    orphan); o1 is resent and "{" is a dead letter."""
    from lklab.crash_points import batch_points
    from lklab.pipelines.order_payments.stream import run_payments_speed
    from shared.config import load_config
    from shared.eventlog import EventLog
    from tests.crash_runs import kill_at_each, sampled_points

    log = [
        [
            order_line("o0", "order", "Z", 0, 10_000),
            order_line("pY", "payment", "Y", 1, 10_000),
            order_line("o1", "order", "A", 10, 10_000),
            order_line("o2", "order", "B", 12, 10_000),
        ],
        [
            order_line("p1", "payment", "A", 11, 10_001),
            order_line("pC", "payment", "C", 5, 10_001),
            order_line("o1", "order", "A", 10, 10_001),
            "{",
        ],
        [order_line("o3", "order", "C", 40, 10_002)],
    ]
    for lake in (tmp_path / "clean", tmp_path / "crashes"):
        for lines in log:
            EventLog(lake).append(lines, stamp=False)
    config = lambda lake: load_config(
        None, {"lake": str(lake), "table-engine": "deltalake", "join-bound": "5s", "watermark-delay": "5s"}, environ={}
    )
    run_payments_speed(spark, config(tmp_path / "clean"), available_now=True)
    expected = committed(tmp_path / "clean")
    assert all(expected[table.name] for table in PAYMENTS_TABLES)  # batch 1 writes to every table
    points = batch_points(1, [table.name for table in PAYMENTS_TABLES])
    assert len(points) == 17 and points[-1] == f"1:after:{PAYMENTS_STATE.name}"
    seed, sample = sampled_points(points, 1, first=False)
    kill_at_each(
        tmp_path / "crashes", "order_payments", ["--join-bound", "5s", "--watermark-delay", "5s"], sample, seed
    )
    run_payments_speed(spark, config(tmp_path / "crashes"), available_now=True)
    assert committed(tmp_path / "crashes") == expected, seed


BASE = datetime(2026, 1, 5, 10, 0, tzinfo=UTC)


def order_line(event_id: str, kind: str, order_id: str, seconds: int, ingest: int) -> str:
    def iso(offset: int) -> str:
        return (BASE + timedelta(seconds=offset)).strftime("%Y-%m-%dT%H:%M:%SZ")

    return json.dumps(
        {
            "event_id": event_id,
            "kind": kind,
            "order_id": order_id,
            "amount": "10.00",
            "currency": "EUR",
            "event_time": iso(seconds),
            "ingest_time": iso(ingest),
        }
    )


def test_a_quiet_log_gets_one_heartbeat_that_makes_unpaid_orders_and_orphans_final(spark, tmp_path):
    """Orders and payments one per segment, a second apart; a payment matches up to 5 s after its
    order, the watermark trails 5 s. The stream, always on, reads them, waits for a quiet second
    and appends one heartbeat."""
    from lklab.pipelines.order_payments.stream import PAYMENTS_RULE, run_payments_speed
    from lklab.replay_runner import replay_on_executors
    from shared.durations import parse_duration
    from shared.eventlog import EventLog
    from shared.tables import Tables

    log = EventLog(tmp_path)
    events = [
        ("o1", "order", "A", 10),
        ("o2", "order", "B", 12),
        ("p2", "payment", "B", 14),
        ("pD", "payment", "D", 20),
        ("o3", "order", "C", 33),
    ]
    for index, (event_id, kind, order_id, seconds) in enumerate(events):
        log.append([order_line(event_id, kind, order_id, seconds, 10_000 + index)], stamp=False)
    config = LabConfig(
        lake=tmp_path,
        table_engine="deltalake",
        join_bound=parse_duration("5s"),
        watermark_delay=parse_duration("5s"),
        heartbeat_interval=parse_duration("1s"),
    )
    stop = threading.Event()
    stream = threading.Thread(
        target=run_payments_speed,
        args=(spark, config),
        kwargs=dict(trigger_interval="0.5 seconds", segments_per_batch=1, stop=stop),  # a micro-batch a segment
    )
    tables = Tables(None, tmp_path, "deltalake")
    metrics = PAYMENTS_STREAM_METRICS.name
    stream.start()
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and (not tables.exists(metrics) or tables.read_arrow(metrics).num_rows < 6):
            time.sleep(0.5)
        time.sleep(2)  # two more quiet intervals: o3 is still held, but the last line is a heartbeat already
    finally:
        stop.set()
        stream.join(timeout=120)
    assert log.last_segment() == 6 and '"heartbeat": true' in log.segment_path(6).read_text()
    assert tables.read_arrow(metrics).sort_by("batch_id")["heartbeats"].to_pylist() == [0, 0, 0, 0, 0, 1]
    # without the heartbeat W* stays at 20 - 5 = 15 (the order at 33 is in the last tick), not past
    # o1's interval [10, 15]; the heartbeat's tick takes it in: 33 - 5 = 28 > 15 makes o1 unpaid
    # and 28 > 20 + 5 pD an orphan; o3's interval [33, 38] stays open
    assert [
        (r["order_event_id"], r["payment_event_id"]) for r in tables.read_arrow("payments_matched").to_pylist()
    ] == [("o2", "p2")]
    assert tables.read_arrow("payments_unpaid")["event_id"].to_pylist() == ["o1"]
    assert tables.read_arrow("payments_orphans")["event_id"].to_pylist() == ["pD"]
    assert tables.read_arrow("payments_late_events").num_rows == tables.read_arrow("payments_dead_letter").num_rows == 0
    replay_on_executors(
        spark, config, PAYMENTS_RULE, "after"
    )  # the heartbeat is in the log: the replay decides the same
    assert rows(tmp_path, catalog.replay_prefix("after"), batch_ids=True) == rows(tmp_path, batch_ids=True)


def test_a_reconcile_reads_the_streams_last_whole_micro_batch_and_no_truth_half_rewritten(spark, with_truth, tmp_path):
    """A micro-batch commits table by table, its state last; a batch rewrites the truth's tables one
    after another: a reconcile reads neither half-way. It takes the last micro-batch whose state
    committed, and waits while a batch holds the truth's tables."""
    from lklab.pipelines.order_payments.batch import PAYMENTS_BATCH_LOCK
    from lklab.pipelines.order_payments.reconcile import reconcile_payments
    from lklab.pipelines.order_payments.stream import SPEED_APP
    from shared.locks import hold
    from shared.tables import Tables

    lake = shutil.copytree(with_truth[0], tmp_path / "lake")
    before = reconcile_payments(spark, config_for(lake), run="before")
    tables = Tables(spark, lake, "deltalake")
    last = tables.committed_version(PAYMENTS_STATE.name, SPEED_APP)
    # the next micro-batch's matches landed (three pairs of lines no side knows), its state did not
    matched = tables.read_arrow(PAYMENTS_MATCHED.name)
    column = matched.schema.get_field_index("order_line_number")
    landed = matched.slice(0, 3).set_column(
        column, matched.field(column), pa.array([10**6, 10**6 + 1, 10**6 + 2], pa.int64())
    )
    tables.append(PAYMENTS_MATCHED.name, landed, app_id=SPEED_APP, version=last + 1)
    assert tables.read_arrow(PAYMENTS_MATCHED.name).num_rows == matched.num_rows + 3
    assert reconcile_payments(spark, config_for(lake), run="half").result == before.result

    with ThreadPoolExecutor(1) as pool:
        with hold(lake, PAYMENTS_BATCH_LOCK):  # a batch rewriting the truth's tables
            waiting = pool.submit(reconcile_payments, spark, config_for(lake), run="waited")
            time.sleep(2)
            assert not waiting.done()
        assert waiting.result(timeout=120).result == before.result


def test_the_join_tables_remember_the_line_settings_and_refuse_others(spark, with_truth, tmp_path):
    """Which lines are dead letters depends on max-clock-skew and max-line-bytes: the truth's and the
    stream's tables record them, a rerun with others is refused, and so is a reconcile of sides
    built with different ones."""
    from deltalake import DeltaTable

    from lklab.pipelines.order_payments.batch import run_payments_batch
    from lklab.pipelines.order_payments.reconcile import reconcile_payments
    from lklab.pipelines.order_payments.stream import run_payments_speed
    from shared.table_settings import SettingsConflict, recorded
    from shared.tables import Tables

    lake = shutil.copytree(with_truth[0], tmp_path / "lake")
    tables = Tables(spark, lake, "deltalake")
    for table in (
        PAYMENTS_TRUTH_MATCHED,
        PAYMENTS_BATCH_DEAD_LETTER,
        PAYMENTS_MATCHED,
        PAYMENTS_DEAD_LETTER,
    ):
        assert {key: recorded(tables, table.name)[key] for key in ("max-clock-skew", "max-line-bytes")} == {
            "max-clock-skew": "5m",
            "max-line-bytes": "1048576",
        }
    with pytest.raises(SettingsConflict, match="max-clock-skew 5m .table. against 1h .this run."):
        run_payments_batch(spark, dataclasses.replace(config_for(lake), max_clock_skew=3_600_000_000))
    with pytest.raises(SettingsConflict, match="max-line-bytes 1048576 .table. against 4096 .this run."):
        run_payments_speed(spark, dataclasses.replace(config_for(lake), max_line_bytes=4096), available_now=True)
    DeltaTable(str(tables.path(PAYMENTS_MATCHED.name))).alter.set_table_properties(
        {"lklab.max-clock-skew": "1h"}, raise_if_not_exists=False
    )
    with pytest.raises(SettingsConflict, match="different max-clock-skew: 5m and 1h"):
        reconcile_payments(spark, config_for(lake))

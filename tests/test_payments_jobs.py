"""The order_payments jobs on one small generated log: the stream whatever its micro-batches and
restarts, the replay, the batch truth against the oracle, the reconciliation and the CLI."""

from __future__ import annotations

import csv
import io
import shutil
import sys

import pyarrow.compute as pc
import pytest

from shared import catalog
from shared.config import LabConfig

MINUTE = 60_000_000
PARAMS = dict(orders=150, seed=7, span=120 * MINUTE, segment_interval=10 * MINUTE, malformed_rate=0.01, retry_rate=0.05)
STREAM_TABLES = [t for t in catalog.PAYMENTS_TABLES if t is not catalog.PAYMENTS_METRICS]


@pytest.fixture(scope="module")
def log_lake(tmp_path_factory):
    from lklab.order_payment_generator import OrderPaymentParams, generate_order_payments

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


@pytest.fixture(scope="module")
def streamed(spark, log_lake, tmp_path_factory):
    """The log streamed one segment per batch (then replayed there), and five per batch elsewhere."""
    from lklab.payments_stream import run_payments_replay, run_payments_speed

    one, many = (shutil.copytree(log_lake, tmp_path_factory.mktemp("payments") / name) for name in ("one", "many"))
    run_payments_speed(spark, config_for(one), available_now=True, segments_per_batch=1)
    run_payments_speed(spark, config_for(many), available_now=True, segments_per_batch=5)
    run_payments_replay(spark, config_for(one), "r1")
    return one, many


def test_the_stream_writes_the_same_rows_whatever_the_segments_per_batch(streamed):
    one, many = streamed
    found = rows(one)
    assert found == rows(many)
    assert found["payments_matched"] and found["payments_late_events"] and found["payments_duplicates"] and found["payments_dead_letter"]


def test_the_replay_writes_the_live_rows_one_segment_per_batch_batch_ids_included(streamed):
    one, _ = streamed
    assert rows(one, catalog.replay_prefix("r1"), batch_ids=True) == rows(one, batch_ids=True)


def test_a_restart_after_half_the_log_gives_the_same_rows(spark, streamed, log_lake, tmp_path):
    from lklab.payments_stream import run_payments_speed

    lake = shutil.copytree(log_lake, tmp_path / "restart")
    segments = sorted((lake / "log").glob("segment-*.jsonl"))
    held = tmp_path / "held"
    held.mkdir()
    for path in segments[len(segments) // 2:]:
        path.rename(held / path.name)
    run_payments_speed(spark, config_for(lake), available_now=True, segments_per_batch=2)
    for path in held.iterdir():
        path.rename(lake / "log" / path.name)
    run_payments_speed(spark, config_for(lake), available_now=True, segments_per_batch=2)
    assert rows(lake) == rows(streamed[0])


@pytest.fixture(scope="module")
def with_truth(spark, streamed):
    from lklab.payments_batch import run_payments_batch

    one, _ = streamed
    return one, run_payments_batch(spark, config_for(one))


def test_the_batch_truth_equals_the_oracle_and_conserves_every_line(with_truth):
    from lklab.order_payment_generator import load_order_payments
    from lklab.order_payment_truth import join_truth
    from shared.tables import Tables

    lake, run = with_truth
    oracle = join_truth(load_order_payments(lake), config_for(lake).join_bound)
    tables = Tables(None, lake, "deltalake")
    matched = tables.read_arrow(catalog.PAYMENTS_TRUTH_MATCHED.name)
    assert set(zip(matched["order_event_id"].to_pylist(), matched["payment_event_id"].to_pylist())) == oracle.matched
    assert set(tables.read_arrow(catalog.PAYMENTS_TRUTH_UNPAID.name)["event_id"].to_pylist()) == oracle.unpaid
    assert set(tables.read_arrow(catalog.PAYMENTS_TRUTH_ORPHANS.name)["event_id"].to_pylist()) == oracle.orphans
    assert run.conserved and run.duplicates > 0 and run.dead_letters > 0


@pytest.mark.parametrize("against", ["speed", "kappa:r1"])
def test_reconcile_explains_every_difference_and_audits_unpaid_orders_and_late_payments(spark, with_truth, against):
    from lklab.payments_reconcile import reconcile_payments
    from shared.tables import Tables

    lake, _ = with_truth
    found = reconcile_payments(spark, config_for(lake), against=against, run=against.replace(":", "-"))
    assert found.result.differences and found.result.unexplained == 0
    assert found.truth_segment == found.stream_segment == len(list((lake / "log").glob("segment-*.jsonl")))
    tables = Tables(None, lake, "deltalake")
    unpaid = tables.read_arrow(catalog.PAYMENTS_UNPAID.name)
    late = tables.read_arrow(catalog.PAYMENTS_LATE_EVENTS.name)
    expected = sorted([("unpaid_order", e) for e in unpaid["event_id"].to_pylist()]
                      + [("late_payment", e) for e in late.filter(pc.equal(late["kind"], "payment"))["event_id"].to_pylist()])
    audited = sorted((r["record"], r["event_id"]) for r in csv.DictReader(io.StringIO(found.audit_csv.read_text())))
    assert audited == expected and len(audited) == found.audit_rows > 0
    assert found.audit_csv.parent.name == f"payments-{against.replace(':', '-')}"


@pytest.mark.slow
def test_the_cli_end_to_end(tmp_path):
    from tests.processes import REPO, run, venv_env

    lake = tmp_path / "lake"
    env = venv_env({"PYTHONPATH": str(REPO), "LKLAB_TABLE_ENGINE": "deltalake"})
    common = ["--lake", str(lake), "--pipeline", "order_payments"]
    steps = [
        ["generate", "--events", "150", "--span", "2h", "--segment-interval", "10m"],
        ["speed", "--available-now", "--segments-per-batch", "4"],
        ["batch"],
        ["reconcile"],
    ]
    outputs = []
    for step in steps:
        done = run([sys.executable, "-m", "lklab.cli", *step, *common], env=env, timeout=400, cwd=REPO)
        assert done.returncode == 0, f"{step} exited {done.returncode}:\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}"
        outputs.append(done.stdout)
    assert "conserved" in outputs[2] and "(agrees)" in outputs[2]
    assert "finance audit:" in outputs[3] and "unexplained" not in outputs[3]

"""Reconciling while the always-on speed layer commits micro-batches.

A micro-batch commits its outputs as several Delta commits, the state last. A reconciliation
that runs meanwhile must read every stream table as the last completed micro-batch left it (one
consistent cut), say which batch and versions it read (``recon_runs``), and find nothing
unexplained. One real ``lklab speed`` process (always on, one segment per micro-batch) follows a
log that keeps growing (a segment every second and a half, as live traffic), while the test
reconciles it in its own Spark session, run after run, against a batch truth over the log's
first segments (the stream's later lines are ``unread`` by the truth). A second ``lklab speed``
on that lake is refused, naming the first.
"""

from __future__ import annotations

import json
import socket
import threading
from pathlib import Path

import pytest
from deltalake import DeltaTable

from lklab.pipelines.billing_windows.batch import run_batch
from lklab.pipelines.billing_windows.generator import GeneratorParams, generate
from lklab.pipelines.billing_windows.reconcile import reconcile
from shared.config import LabConfig
from shared.eventlog import EventLog
from shared.tables import Tables
from tests.processes import VENV_BIN, start, stop_all, tail, venv_env, wait_until

pytestmark = pytest.mark.slow
HOUR = 3_600_000_000
TRUTH_SEGMENTS = 4  # the batch truth's position; the rest of the log arrives while the test runs


def batches_done(lake: Path) -> int:
    path = lake / "tables" / "stream_metrics"
    return DeltaTable(str(path)).to_pyarrow_dataset().count_rows() if DeltaTable.is_deltatable(str(path)) else 0


def read_so_far(lake: Path) -> int:
    """The last segment the speed layer's committed micro-batches read (0: none yet)."""
    path = lake / "tables" / "stream_metrics"
    if not DeltaTable.is_deltatable(str(path)):
        return 0
    segments = DeltaTable(str(path)).to_pyarrow_dataset().to_table(columns=["last_segment"]).column("last_segment")
    return max((s for s in segments.to_pylist() if s is not None), default=0)


def test_reconciliations_while_micro_batches_commit_read_one_cut_and_find_nothing_unexplained(spark, tmp_path):
    template, lake = tmp_path / "template", tmp_path / "lake"
    generate(
        GeneratorParams(events=1_500, accounts=5, span=4 * HOUR, segment_interval=HOUR // 6, duplicate_rate=0.02),
        template,
    )
    traffic = [segment.path.read_bytes().splitlines() for segment in EventLog(template).segments()]
    log = EventLog(lake)
    for lines in traffic[:TRUTH_SEGMENTS]:
        log.append(lines, stamp=False)
    config = LabConfig(lake=lake, table_engine="deltalake")
    env = venv_env({"LKLAB_LAKE": str(lake), "LKLAB_TABLE_ENGINE": "deltalake", "LKLAB_HEARTBEAT_INTERVAL": "0"})
    env.pop("LKLAB_CRASH_AT", None)
    # The layer starts first, so that its JVM starts while the truth is computed; the rest of the
    # log arrives after both (the truth and the first micro-batch).
    speed = start("speed", [str(VENV_BIN / "lklab"), "speed", "--segments-per-batch", "1"], env=env, log_dir=tmp_path)
    services, runs, committed_during, quiet = [speed], [], [], threading.Event()

    def live_traffic() -> None:
        for lines in traffic[TRUTH_SEGMENTS:]:
            if quiet.wait(1.5):
                return
            log.append(lines, stamp=False)

    appender = threading.Thread(target=live_traffic)
    try:
        run_batch(spark, config)  # the truth over the first segments
        wait_until(
            lambda: read_so_far(lake) >= 1, timeout=300, what="the first micro-batch", interval=0.2, services=[speed]
        )
        second = start("second-speed", [str(VENV_BIN / "lklab"), "speed", "--available-now"], env=env, log_dir=tmp_path)
        services.append(second)
        appender.start()
        while len(runs) < 3:
            before = batches_done(lake)
            runs.append(reconcile(spark, config))
            committed_during.append(batches_done(lake) > before)
            assert speed.alive(), tail(speed.log)
        quiet.set()
        appender.join()
        last = log.last_segment()
        wait_until(
            lambda: read_so_far(lake) == last, timeout=300, what="the layer to read the whole log", services=[speed]
        )
        runs.append(reconcile(spark, config))  # and once it has read everything
        assert second.process.wait(timeout=300) == 2, tail(second.log)
    finally:
        quiet.set()
        stop_all(services)
    lock = lake.resolve() / "locks" / "stream-speed.lock"
    holder = json.loads(lock.read_text())
    assert (holder["pid"], holder["host"], holder["command"]) == (
        speed.pid,
        socket.gethostname(),
        "lklab speed --segments-per-batch 1",
    )
    assert second.log.read_text().endswith(
        f"lklab speed: stream-speed is locked by pid {speed.pid} on {holder['host']} "
        f"({holder['command']}, since {holder['since']}): {lock}\n"
    ), tail(second.log)
    assert any(committed_during), "no micro-batch committed while a reconciliation ran"
    assert len({r.stream_batch for r in runs}) >= 2 and runs[-1].stream_last_segment == last > TRUTH_SEGMENTS
    tables = Tables(spark, lake, "deltalake")
    recorded = {row["run_id"]: row for row in tables.read_arrow("recon_runs").to_pylist()}
    for result in runs:
        assert result.unexplained_events == 0 and result.breaches() == [], result.run_id
        assert result.batch_last_segment == TRUTH_SEGMENTS
        versions = dict(result.stream_versions)
        # the cut is that batch: stream_metrics as read ends with it, one segment per micro-batch
        metrics = tables.read_arrow("stream_metrics", versions["stream_metrics"]).to_pylist()
        assert max(row["batch_id"] for row in metrics) == result.stream_batch
        assert result.stream_last_segment == result.stream_batch + 1
        row = recorded[result.run_id]
        assert (row["stream_batch"], json.loads(row["stream_versions"])) == (result.stream_batch, versions)

"""Exactly once under SIGKILL: a crashed and restarted speed layer ends with the tables of an
uninterrupted run on the same log (no lost rows, no duplicates).

Each crash run is a real ``lklab speed --available-now`` process killed with SIGKILL, either by
itself at a named point of a micro-batch (``LKLAB_CRASH_AT``) or from outside at an arbitrary
moment. The restart resumes from Spark's checkpoint in the test's own Spark session (another JVM
than the killed ones', as a new process's would be), as the unique_visitors and order_payments
crash tests restart: a process start is a JVM start, and the killed runs already cover the CLI.
"""

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lklab.pipelines.billing_windows.generator import GeneratorParams, generate
from lklab.pipelines.billing_windows.speed import SPEED_TABLES, run_speed
from shared.config import LabConfig
from shared.micro_batch import TIMING_COLUMNS
from shared.tables import Tables
from tests.crash_runs import CRASH_SEED, sampled_points

pytestmark = pytest.mark.slow
LKLAB = str(Path(sys.executable).parent / "lklab")
VOLATILE = TIMING_COLUMNS


def speed(lake: Path, crash_at: str | None = None, kill_at_commit: int | None = None) -> int:
    """Run ``lklab speed --available-now`` on ``lake``; with ``kill_at_commit``, SIGKILL it from
    outside the moment ``stream_metrics`` gets its commit of that version (the batch's other
    commits, running side by side, may be anywhere)."""
    env = {**os.environ, "LKLAB_LAKE": str(lake), "LKLAB_TABLE_ENGINE": "deltalake"}
    env.pop("LKLAB_CRASH_AT", None)
    if crash_at:
        env["LKLAB_CRASH_AT"] = crash_at
    process = subprocess.Popen(
        [LKLAB, "speed", "--available-now"],
        env=env,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    commit = lake / "tables" / "stream_metrics" / "_delta_log" / f"{kill_at_commit or 0:020d}.json"
    try:
        deadline = time.monotonic() + 600
        while process.poll() is None and time.monotonic() < deadline:
            if kill_at_commit is not None and commit.exists():
                os.killpg(process.pid, signal.SIGKILL)
            time.sleep(0.01)
        code = process.wait(timeout=5)
    finally:
        try:
            os.killpg(process.pid, signal.SIGKILL)  # the JVM of a killed driver goes down with it
        except ProcessLookupError:
            pass
    return code


def contents(spark, lake: Path) -> dict:
    tables = Tables(spark, lake, "deltalake")
    out = {}
    for name in SPEED_TABLES:
        rows = tables.read_arrow(name).to_pylist() if tables.exists(name) else []
        rows = [{k: v for k, v in row.items() if k not in VOLATILE} for row in rows]
        out[name] = sorted(rows, key=lambda row: [str(v) for v in row.values()])
    return out


@pytest.fixture(scope="module")
def reference(tmp_path_factory, spark):
    lake = tmp_path_factory.mktemp("reference")
    generate(
        GeneratorParams(
            events=1_500, accounts=5, duplicate_rate=0.03, malformed_rate=0.01, segment_interval=2 * 3_600_000_000
        ),
        lake,
    )
    # the uninterrupted run, in the test's own Spark session (the crashed runs are processes)
    run_speed(spark, LabConfig(lake=lake, table_engine="deltalake"), available_now=True)
    return lake, contents(spark, lake)


def restart(spark, lake: Path) -> None:
    """The run after the kills, to the log's end: it resumes from the checkpoint they left."""
    run_speed(spark, LabConfig(lake=lake, table_engine="deltalake"), available_now=True)


def fresh_copy(reference_lake: Path, target: Path) -> Path:
    shutil.copytree(reference_lake / "log", target / "log")
    return target


# Every named point of a micro-batch: its start, and before and after the commit of each table
# (the five outputs run side by side; the state, the commit point, is written last). Each
# restart replays batch 1, which the process before it left half done, until the last point:
# after its state, the batch is complete in Delta but not yet in Spark's commit log. The points
# fall in three phases: nothing committed (the start), outputs committed in part or all of them
# but not the state (every point between: the outputs commit side by side in no fixed order, and
# a replay skips each output that landed, by its batch id, whichever they are), and the state
# committed (the last point).
CRASH_POINTS = ["1:start"] + [f"1:{when}:{table}" for table in SPEED_TABLES for when in ("before", "after")]


def test_sigkill_at_crash_points_in_turn_then_restart_equals_uninterrupted_run(spark, tmp_path, reference):
    """One process per crash point, each resuming where the killed one left off (a batch is
    replayed after every crash), then a clean restart: the tables equal the uninterrupted run's.
    Each run walks the first and the last point and one drawn between them (``crash_runs``): one
    point of each phase, as the unique_visitors and order_payments crash tests do."""
    reference_lake, expected = reference
    lake = fresh_copy(reference_lake, tmp_path)
    seed, points = sampled_points(CRASH_POINTS, others=1)
    for crash_at in points:
        assert speed(lake, crash_at=crash_at) == -signal.SIGKILL, f"{crash_at} was not reached ({CRASH_SEED}={seed})"
    restart(spark, lake)
    assert contents(spark, lake) == expected, f"{CRASH_SEED}={seed}"


def test_sigkill_from_outside_twice_then_restart(spark, tmp_path, reference):
    reference_lake, expected = reference
    lake = fresh_copy(reference_lake, tmp_path)
    for commit in (0, 2):  # after the first batch's metrics landed, then mid-way through the rest
        assert speed(lake, kill_at_commit=commit) == -signal.SIGKILL
    restart(spark, lake)
    assert contents(spark, lake) == expected


def test_a_reconciliation_after_a_micro_batch_half_committed_reads_the_last_complete_one(spark, tmp_path, reference):
    """A micro-batch commits table by table. Killed after a batch merged its windows (its other
    outputs may or may not have landed), the lake is what a reconciliation running at that
    moment would find: it reads every stream table as the batch before left it, records that
    cut, and finds nothing unexplained."""
    from deltalake import DeltaTable

    from lklab.pipelines.billing_windows.batch import run_batch
    from lklab.pipelines.billing_windows.reconcile import reconcile

    def tags(lake: Path) -> dict[int, int]:
        """Version -> micro-batch of each commit of ``speed_aggregates``."""
        table = DeltaTable(str(lake / "tables" / "speed_aggregates"))
        return {c["version"]: int(c["lklab.version"]) for c in table.history() if "lklab.version" in c}

    reference_lake, _ = reference
    batch = sorted(tags(reference_lake).values())[-2]  # a batch that changed windows, not the last
    lake = fresh_copy(reference_lake, tmp_path)
    assert speed(lake, crash_at=f"{batch}:after:speed_aggregates") == -signal.SIGKILL
    written = tags(lake)
    assert written[max(written)] == batch  # its windows are in the table's latest version
    config = LabConfig(lake=lake, table_engine="deltalake")
    run_batch(spark, config)
    result = reconcile(spark, config)
    assert result.stream_batch == batch - 1
    # the version just before the batch's commit (after the settings recorded on the table)
    assert dict(result.stream_versions)["speed_aggregates"] == min(v for v, b in written.items() if b == batch) - 1
    assert result.unexplained_events == 0 and not result.breaches()


def test_always_on_picks_up_new_segments_and_stops_cleanly_on_sigterm(spark, tmp_path, reference):
    """The always-on job follows the log as it grows; SIGTERM ends it after the current batch."""
    from shared.eventlog import EventLog

    reference_lake, expected = reference
    segments = sorted((reference_lake / "log").glob("segment-*.jsonl"))
    log = EventLog(tmp_path)
    log.append(segments[0].read_bytes().splitlines(), stamp=False)
    env = {**os.environ, "LKLAB_LAKE": str(tmp_path), "LKLAB_TABLE_ENGINE": "deltalake"}
    env.pop("LKLAB_CRASH_AT", None)
    process = subprocess.Popen(
        [LKLAB, "speed"], env=env, start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    tables = Tables(spark, tmp_path, "deltalake")

    def batches_done() -> int:
        return tables.read_arrow("stream_metrics").num_rows if tables.exists("stream_metrics") else 0

    try:
        for done, segment in enumerate(segments[1:], start=1):
            deadline = time.monotonic() + 120
            while batches_done() < done and time.monotonic() < deadline:
                time.sleep(0.5)
            assert batches_done() == done
            log.append(segment.read_bytes().splitlines(), stamp=False)  # live traffic
        deadline = time.monotonic() + 120
        while batches_done() < len(segments) and time.monotonic() < deadline:
            time.sleep(0.5)
        process.send_signal(signal.SIGTERM)
        out, _ = process.communicate(timeout=120)
    finally:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    assert process.returncode == 0
    assert f"{len(segments)} micro-batches" in out
    assert contents(spark, tmp_path) == expected

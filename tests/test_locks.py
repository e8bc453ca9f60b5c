"""One writer per role: a second writer is refused naming the first; a killed writer leaves no
stale lock; replacing the lake waits for no one and is refused while a writer runs. End to end:
a second ``lklab replay`` of a running name (``--replace`` too) exits 2 and deletes nothing, and
run-history appends from two processes keep every row."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from shared.locks import LockHeld, history_append, hold, whole_lake, writer
from shared.tables import Tables

HOLD = """
import sys, time
from shared.locks import writer
with writer(sys.argv[1], sys.argv[2]):
    print("held", flush=True)
    time.sleep(600)
"""


def holder(lake, role) -> subprocess.Popen:
    process = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(lake), role],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": os.getcwd()},
    )
    assert process.stdout.readline().strip() == "held"
    return process


def test_a_second_writer_of_a_role_is_refused_naming_the_first_and_kill_9_frees_it(tmp_path):
    first = holder(tmp_path, "speed")
    try:
        with pytest.raises(LockHeld, match=rf"speed is locked by pid {first.pid} on .* since"):
            with writer(tmp_path, "speed"):
                pass
        with writer(tmp_path, "replay-other"):  # another role is free
            pass
        with pytest.raises(LockHeld, match=rf"in use by speed \(pid {first.pid}"):
            with whole_lake(tmp_path):
                pass
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait()
    with writer(tmp_path, "speed"):  # the kernel released the killed process's lock
        pass
    with whole_lake(tmp_path):
        with pytest.raises(LockHeld, match="being replaced"):
            with writer(tmp_path, "batch"):
                pass


def test_history_appends_wait_for_each_other(tmp_path):
    with history_append(tmp_path, "replay_runs"):
        with pytest.raises(LockHeld):
            with hold(tmp_path, "history-replay_runs"):
                pass
    started = time.monotonic()
    with history_append(tmp_path, "replay_runs"):
        pass
    assert time.monotonic() - started < 5


def test_roles_are_plain_names(tmp_path):
    with pytest.raises(ValueError, match="letters, digits"):
        with writer(tmp_path, "../escape"):
            pass


# --- end to end: the commands -------------------------------------------------------------

LKLAB = str(Path(sys.executable).parent / "lklab")


def lklab(lake, *args) -> subprocess.Popen:
    env = {key: value for key, value in os.environ.items() if not key.startswith("LKLAB_")}
    env.update({"LKLAB_LAKE": str(lake), "LKLAB_TABLE_ENGINE": "deltalake", "PYSPARK_PYTHON": sys.executable})
    return subprocess.Popen([LKLAB, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def refusal(lake, role: str, command: str) -> str:
    """The line a refused command prints: the holder as its lock file records it."""
    lock = Path(lake).resolve() / "locks" / f"{role}.lock"
    held = json.loads(lock.read_text())
    return f"lklab {command}: {role} is locked by pid {held['pid']} on {held['host']} ({held['command']}, since {held['since']}): {lock}\n"


def test_a_second_replay_of_a_name_is_refused_and_replace_deletes_nothing_of_the_running_one(spark, tmp_path):
    """The command refuses before it starts Spark; the job itself takes the lock before it
    touches anything (what keeps two replays apart when both pass the command's check)."""
    from lklab.pipelines.billing_windows.replay import run_replay
    from shared.config import LabConfig

    lake = tmp_path / "lake"
    owned = [
        lake / "tables" / "kappa" / "x" / "speed_aggregates" / "part-0.parquet",
        lake / "checkpoints" / "kappa" / "x" / "offsets" / "0",
    ]
    for path in owned:
        path.parent.mkdir(parents=True)
        path.write_text("the running replay's")
    first = holder(lake.resolve(), "speed-replay-x")
    try:
        held = json.loads((lake / "locks" / "speed-replay-x.lock").read_text())
        assert (held["pid"], held["host"]) == (first.pid, socket.gethostname())
        second, replace = lklab(lake, "replay", "--name", "x"), lklab(lake, "replay", "--name", "x", "--replace")
        for refused in (second, replace):
            _, errors = refused.communicate(timeout=300)
            assert refused.returncode == 2 and errors.endswith(refusal(lake, "speed-replay-x", "replay")), errors[
                -3000:
            ]
        with pytest.raises(LockHeld, match=rf"speed-replay-x is locked by pid {first.pid} "):
            run_replay(spark, LabConfig(lake=lake, table_engine="deltalake"), "x", replace=True)
        assert [path.read_text() for path in owned] == ["the running replay's"] * 2
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait()


APPEND = """
import os, sys, time
from shared.batch_runs import BatchRun, record_run
from shared.tables import Tables
lake, signals, count, writer_id = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
tables = Tables(None, lake, "deltalake")
open(os.path.join(signals, f"ready-{writer_id}"), "w").close()
while not os.path.exists(os.path.join(signals, "go")):  # both start at once
    time.sleep(0.002)
for n in range(count):
    record_run(tables, BatchRun(last_segment=writer_id, lines=n, events=n, duplicates=0, dead_letters=0), (None, None))
"""


def test_run_history_appends_from_two_processes_at_once_keep_every_row(tmp_path):
    """A run-history table takes its next row number by reading itself (``batch_runs`` here;
    ``replay_runs`` alike, where replays of different names end at once): two processes
    appending at once wait for each other, and every row lands with its own number."""
    lake, signals, each = tmp_path / "lake", tmp_path / "signals", 8
    signals.mkdir()
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    writers = [
        subprocess.Popen(
            [sys.executable, "-c", APPEND, str(lake), str(signals), str(each), str(writer_id)],
            env=env,
            stderr=subprocess.PIPE,
            text=True,
        )
        for writer_id in (1, 2)
    ]
    deadline = time.monotonic() + 60
    while not all((signals / f"ready-{w}").exists() for w in (1, 2)) and time.monotonic() < deadline:
        time.sleep(0.01)
    (signals / "go").touch()
    for process in writers:
        assert process.wait(timeout=120) == 0, process.stderr.read()
    rows = Tables(None, lake, "deltalake").read_arrow("batch_runs").to_pylist()
    assert sorted(row["run_number"] for row in rows) == list(range(1, 2 * each + 1))
    # each writer's rows are all there, in its own order
    for writer_id in (1, 2):
        mine = sorted((row["run_number"], row["lines"]) for row in rows if row["last_segment"] == writer_id)
        assert [lines for _, lines in mine] == list(range(each))

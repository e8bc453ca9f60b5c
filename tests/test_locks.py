"""One writer per role: a second writer is refused naming the first; a killed writer leaves no
stale lock; replacing the lake waits for no one and is refused while a writer runs."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from shared.locks import LockHeld, history_append, hold, whole_lake, writer

HOLD = """
import sys, time
from shared.locks import writer
with writer(sys.argv[1], sys.argv[2]):
    print("held", flush=True)
    time.sleep(600)
"""


def holder(lake, role) -> subprocess.Popen:
    process = subprocess.Popen([sys.executable, "-c", HOLD, str(lake), role], stdout=subprocess.PIPE, text=True,
                               env={**os.environ, "PYTHONPATH": os.getcwd()})
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

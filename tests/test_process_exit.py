"""An ``lklab`` process that read a Delta table ends with its own exit code.

Before :mod:`lklab.cli.process_exit`, reading a table through delta-rs' pyarrow dataset left Arrow
reader threads that aborted the interpreter's teardown (SIGABRT, exit -6, "terminate called without
an active exception") after the command had printed its answer: 20 of 20 runs of the check below.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
from deltalake import write_deltalake

LKLAB = str(Path(sys.executable).parent / "lklab")
RUNS = 5


def test_health_over_a_delta_table_exits_with_its_code_every_time(tmp_path):
    write_deltalake(
        str(tmp_path / "tables" / "stream_metrics"),
        pa.table(
            {
                "batch_id": pa.array([0, 1], pa.int64()),
                "last_segment": pa.array([1, 2], pa.int64()),
                "watermark_lag_seconds": pa.array([3.0, 4.0]),
            }
        ),
    )
    env = {key: value for key, value in os.environ.items() if not key.startswith("LKLAB_")}
    for _ in range(RUNS):
        checked = subprocess.run(
            [LKLAB, "health", "--lake", str(tmp_path), "--json"],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
        )
        assert (checked.returncode, checked.stderr) == (0, ""), checked.stdout + checked.stderr
        health = json.loads(checked.stdout)
        assert (health["last_batch_id"], health["watermark_lag_seconds"], health["healthy"]) == (1, 4.0, True)


def test_python_dash_m_ends_with_the_commands_code_after_its_output(tmp_path):
    env = {key: value for key, value in os.environ.items() if not key.startswith("LKLAB_")}
    (tmp_path / "log").mkdir()  # a lake whose log is empty so far
    checked = subprocess.run(
        [sys.executable, "-m", "lklab.cli", "health", "--lake", str(tmp_path)],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    # a lake the stream never wrote: unhealthy, exit 3, and the reason printed before the exit
    assert checked.returncode == 3, checked.stdout + checked.stderr
    assert "has not committed a micro-batch" in checked.stdout

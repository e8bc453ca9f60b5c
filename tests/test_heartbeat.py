"""An idle log does not freeze time: the always-on speed layer appends a heartbeat when the log
has been quiet, the windows the watermark can then close become final, and a replay of the log
(heartbeat included) writes the same rows."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from lklab.pipelines.billing_windows.agreement import BOOKKEEPING
from lklab.pipelines.billing_windows.replay import run_replay
from lklab.pipelines.billing_windows.speed import SPEED_TABLES
from shared.config import load_config
from shared.eventlog import EventLog
from shared.tables import Tables
from tests.conftest import event_line
from tests.test_transcripts import iso, offset

pytestmark = pytest.mark.slow
LKLAB = str(Path(sys.executable).parent / "lklab")
SETTINGS = {"window-kind": "tumbling", "window-size": "5s", "watermark-delay": "5s"}


def test_a_quiet_log_gets_one_heartbeat_and_the_replay_sees_it(spark, tmp_path):
    log = EventLog(tmp_path)
    for index, seconds in enumerate((10, 12, 18, 22, 33)):  # one event per segment, a second apart
        log.append(
            [event_line(event_id=f"e{index}", event_time=iso(seconds), ingest_time=iso(10_000 + index))], stamp=False
        )
    env = {**os.environ, "LKLAB_LAKE": str(tmp_path), "LKLAB_TABLE_ENGINE": "deltalake"}
    # a micro-batch a segment (always on, a stream would take the five at once)
    argv = [LKLAB, "speed", "--heartbeat-interval", "1s", "--segments-per-batch", "1"]
    argv += [f"--{k}={v}" for k, v in SETTINGS.items()]
    process = subprocess.Popen(
        argv, env=env, start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    tables = Tables(spark, tmp_path, "deltalake")
    try:
        deadline = time.monotonic() + 240
        while log.last_segment() < 6 and time.monotonic() < deadline and process.poll() is None:
            time.sleep(0.5)
        assert log.last_segment() == 6, "no heartbeat was appended"
        assert '"heartbeat": true' in log.segment_path(6).read_text()
        while time.monotonic() < deadline and (
            not tables.exists("stream_metrics") or tables.read_arrow("stream_metrics").num_rows < 6
        ):
            time.sleep(0.5)
        time.sleep(3)  # three more quiet intervals: nothing left to close, so no second heartbeat
        assert log.last_segment() == 6
        process.send_signal(signal.SIGTERM)
        _, errors = process.communicate(timeout=120)
    finally:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    assert process.returncode == 0

    windows = {(offset(r["window_start"]), r["status"]) for r in tables.read_arrow("speed_aggregates").to_pylist()}
    # without the heartbeat the watermark would stay at 22 - 5 = 17 (the event at 33 is in the
    # last tick); the heartbeat's tick takes it in: 33 - 5 = 28 closes [15, 20) and [20, 25)
    assert windows == {(10, "final"), (15, "final"), (20, "final"), (30, "open")}
    assert sum(tables.read_arrow("stream_metrics")["heartbeats"].to_pylist()) == 1
    # one structured log line per micro-batch
    logged = [json.loads(line[line.index("{") :]) for line in errors.splitlines() if "lklab.speed" in line]
    assert [(entry["batch"], entry["lines"], entry["heartbeats"]) for entry in logged] == [
        (b, 1, int(b == 5)) for b in range(6)
    ]

    run_replay(
        spark, load_config(None, {"lake": str(tmp_path), "table-engine": "deltalake", **SETTINGS}, environ={}), "after"
    )
    for name in SPEED_TABLES:
        live, replayed = (tables.read_arrow(prefix + name).to_pylist() for prefix in ("", "kappa/after/"))
        ignore = BOOKKEEPING
        normal = lambda rows: Counter(
            tuple((k, str(v)) for k, v in sorted(row.items()) if k not in ignore) for row in rows
        )
        assert normal(live) == normal(replayed), name

"""A command that runs one job and exits starts its JVM with C1 alone, unless the JIT is set."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from shared.eventlog import EventLog
from shared.jvm_compilers import ONE_JOB, SMALL_LOG_BYTES, one_job_options
from tests.processes import REPO, VENV_BIN, run, venv_env


@pytest.mark.parametrize(
    "given, tools, added",
    [
        ("", "", "-XX:TieredStopAtLevel=1"),
        ("-XX:+UseSerialGC -Xmx2g", "", "-XX:TieredStopAtLevel=1"),
        ("-XX:TieredStopAtLevel=4", "", None),  # both compilers: the user's choice
        ("-Xshare:auto -XX:-TieredCompilation", "", None),
        ("-XX:CompilationMode=high-only", "", None),
        ("", "-XX:TieredStopAtLevel=4", None),  # the JVM reads JAVA_TOOL_OPTIONS too
    ],
)
def test_one_job_adds_c1_alone_unless_the_jit_is_set(monkeypatch, given, tools, added):
    monkeypatch.setenv("JAVA_TOOL_OPTIONS", tools)
    assert ONE_JOB == "-XX:TieredStopAtLevel=1"
    assert one_job_options(given) == added


def test_a_job_that_grows_with_the_log_stops_at_c1_only_below_the_small_log(tmp_path, monkeypatch):
    monkeypatch.delenv("JAVA_TOOL_OPTIONS", raising=False)
    lake = tmp_path / "lake"
    log = EventLog(lake)
    assert log.size_bytes() == 0  # no log yet
    assert one_job_options("", lake) == ONE_JOB
    log.append(["a" * 99, "b" * 49], stamp=False)
    log.append(["c"], stamp=False)
    assert log.size_bytes() == 100 + 50 + 2  # the lines and their newlines
    (log.root / "segment-7.jsonl").write_text("not a segment's name")
    assert log.size_bytes() == 152
    with open(log.segment_path(3), "wb") as big:  # sparse: its size without the disk
        big.truncate(SMALL_LOG_BYTES - 152 - 1)
    assert (log.size_bytes(), one_job_options("", lake)) == (SMALL_LOG_BYTES - 1, ONE_JOB)
    log.append(["d"], stamp=False)
    assert (log.size_bytes(), one_job_options("", lake)) == (SMALL_LOG_BYTES + 1, None)
    assert one_job_options("") == ONE_JOB  # a reconcile: whatever the log


def _tier(stdout: str) -> int:
    """The JVM's TieredStopAtLevel, from its ``-XX:+PrintFlagsFinal`` table."""
    (level,) = re.findall(r"^\s*intx TieredStopAtLevel\s+= (\d+)", stdout, re.M)
    return int(level)


@pytest.mark.slow
@pytest.mark.parametrize(
    "command, given, tier", [("batch", "", 1), ("reconcile", "", 1), ("reconcile", "-XX:TieredStopAtLevel=4", 4)]
)
def test_one_job_commands_start_their_jvm_on_c1_alone_unless_told_a_tier(tmp_path, command, given, tier):
    # The JVM starts and prints its flags. The batch reads a log of one line (a dead letter); the
    # reconcile, on a lake without a truth, stops at what is missing.
    lake = tmp_path / "lake"
    EventLog(lake).append(["not json"], stamp=False)
    env = venv_env({"PYTHONPATH": str(REPO), "SPARK_SUBMIT_OPTS": f"{given} -XX:+PrintFlagsFinal".strip()})
    env.pop("JAVA_TOOL_OPTIONS", None)
    done = run([str(VENV_BIN / "lklab"), command, "--lake", str(lake)], env=env, timeout=300)
    ended = {"batch": (0, "1 dead letters"), "reconcile": (2, "no batch truth: run 'lklab batch' first")}
    code, said = ended[command]
    assert done.returncode == code and said in done.stdout + done.stderr, done.stderr[-3000:]
    assert _tier(done.stdout) == tier


SESSION = """
import os, sys
from shared.config import LabConfig
from shared.spark_session import spark_session
spark = spark_session(LabConfig(lake=sys.argv[1], table_engine="deltalake"), "jit-check", one_job=True, log_bound=True)
jvm = spark.sparkContext._jvm
print(" ".join(jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments()))
print(repr(os.environ.get("SPARK_SUBMIT_OPTS")))
spark.stop()
"""


@pytest.mark.slow
@pytest.mark.parametrize("log_bytes, tier", [(10, 1), (SMALL_LOG_BYTES, None)])
def test_a_log_bound_jobs_jvm_stops_at_c1_for_a_small_log_and_only_that_jvm(tmp_path, log_bytes, tier):
    lake = tmp_path / "lake"
    (lake / "log").mkdir(parents=True)
    with open(EventLog(lake).segment_path(1), "wb") as segment:
        segment.truncate(log_bytes)  # sparse: a big log without the disk
    env = {k: v for k, v in os.environ.items() if k not in ("SPARK_SUBMIT_OPTS", "JAVA_TOOL_OPTIONS")}
    env["PYTHONPATH"] = str(REPO)
    done = subprocess.run(
        [sys.executable, "-c", SESSION, str(lake)], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    arguments, after = done.stdout.strip().splitlines()[-2:]
    assert [a for a in arguments.split() if "TieredStopAtLevel" in a] == (
        [f"-XX:TieredStopAtLevel={tier}"] if tier else []
    )
    assert "TieredStopAtLevel" not in after  # the processes it starts later are not given it

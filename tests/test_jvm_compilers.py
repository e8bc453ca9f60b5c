"""A command that runs one job and exits starts its JVM with C1 alone, unless told a tier."""

from __future__ import annotations

import re

import pytest

from shared.eventlog import EventLog
from shared.jvm_compilers import ONE_JOB, SMALL_LOG_BYTES, log_bytes, one_job_options
from tests.processes import REPO, VENV_BIN, run, venv_env


@pytest.mark.parametrize(
    "given, added",
    [
        ("", "-XX:TieredStopAtLevel=1"),
        ("-XX:+UseSerialGC -Xmx2g", "-XX:TieredStopAtLevel=1"),
        ("-XX:TieredStopAtLevel=4", None),  # both compilers: the user's choice
        ("-Xshare:auto -XX:TieredStopAtLevel=1", None),
    ],
)
def test_one_job_adds_c1_alone_unless_a_tier_is_named(given, added):
    assert ONE_JOB == "-XX:TieredStopAtLevel=1"
    assert one_job_options(given) == added


def _tier(stdout: str) -> int:
    """The JVM's TieredStopAtLevel, from its ``-XX:+PrintFlagsFinal`` table."""
    (level,) = re.findall(r"^\s*intx TieredStopAtLevel\s+= (\d+)", stdout, re.M)
    return int(level)


@pytest.mark.slow
@pytest.mark.parametrize(
    "command, given, tier",
    [("batch", "", 1), ("reconcile", "-XX:TieredStopAtLevel=4", 4)],
)
def test_one_job_commands_start_their_jvm_on_c1_alone_unless_told_a_tier(tmp_path, command, given, tier):
    # An empty lake: the JVM starts and prints its flags, then the command stops at what is missing.
    lake = tmp_path / "lake"
    lake.mkdir()
    env = venv_env({"PYTHONPATH": str(REPO), "SPARK_SUBMIT_OPTS": f"{given} -XX:+PrintFlagsFinal".strip()})
    done = run([str(VENV_BIN / "lklab"), command, "--lake", str(lake)], env=env, timeout=300)
    missing = {"batch": "is empty: run 'lklab generate' first", "reconcile": "no batch truth: run 'lklab batch' first"}
    assert missing[command] in done.stderr, done.stderr[-3000:]
    assert _tier(done.stdout) == tier


def test_a_job_that_grows_with_the_log_stops_at_c1_only_below_the_small_log(tmp_path):
    assert SMALL_LOG_BYTES == 64 * 2**20
    assert one_job_options("", SMALL_LOG_BYTES - 1) == ONE_JOB
    assert one_job_options("", SMALL_LOG_BYTES) is None
    assert one_job_options("-XX:TieredStopAtLevel=4", 0) is None
    lake = tmp_path / "lake"
    assert log_bytes(lake) == 0  # no log yet
    log = EventLog(lake)
    log.append(["a" * 99, "b" * 49])
    log.append(["c"])
    assert log_bytes(lake) == sum(segment.size_bytes for segment in log.segments())
    assert log_bytes(lake) > 99 + 49 + 1  # every line and its newline, and the segments' headers

"""The driver JVM's class-data archive: when a session maps it, writes one, or leaves it alone."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from lklab.class_archive import recording_options
from shared.jvm_archive import ARCHIVE, WRITE_ARCHIVE, driver_java_options


def test_an_archive_is_mapped_when_it_exists_and_only_then(tmp_path, monkeypatch):
    monkeypatch.delenv(WRITE_ARCHIVE, raising=False)
    monkeypatch.delenv("SPARK_SUBMIT_OPTS", raising=False)
    archive = tmp_path / "classes.jsa"
    assert driver_java_options(archive) is None
    archive.write_bytes(b"")
    assert driver_java_options(archive) == (
        f"-XX:SharedArchiveFile={archive} -Xlog:cds=off -Xlog:cds+dynamic=off -Xlog:class+path=off"
    )


def test_the_archiving_run_writes_where_it_is_told_and_an_archive_of_the_callers_wins(tmp_path, monkeypatch):
    archive = tmp_path / "classes.jsa"
    archive.write_bytes(b"")
    monkeypatch.setenv("SPARK_SUBMIT_OPTS", "-XX:+UseSerialGC -XX:SharedArchiveFile=/elsewhere.jsa")
    assert driver_java_options(archive) is None
    monkeypatch.setenv(WRITE_ARCHIVE, str(tmp_path / "new.jsa"))
    assert driver_java_options(archive).startswith(f"-XX:ArchiveClassesAtExit={tmp_path / 'new.jsa'} ")


@pytest.mark.parametrize(
    "given, options",
    [
        ("", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"),
        ("-Xmx2g", "-Xmx2g -XX:TieredStopAtLevel=1 -XX:+UseSerialGC"),
        ("-XX:+UseG1GC", "-XX:+UseG1GC -XX:TieredStopAtLevel=1"),  # one collector: the caller's
        ("-XX:TieredStopAtLevel=4 -XX:+UseSerialGC", "-XX:TieredStopAtLevel=4 -XX:+UseSerialGC"),
    ],
)
def test_the_recording_jvm_adds_only_the_options_the_caller_left_open(given, options):
    assert recording_options(given) == options


REPO = Path(__file__).resolve().parents[1]
SESSION = """
from shared.config import LabConfig
from shared.spark_session import spark_session
spark = spark_session(LabConfig(lake="unused", table_engine="deltalake"), "archive-check")
jvm = spark.sparkContext._jvm
print(" ".join(jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments()))
print(jvm.java.lang.System.getProperty("java.vm.info"))
spark.stop()
"""


@pytest.mark.slow
@pytest.mark.skipif(not ARCHIVE.is_file(), reason="no class-data archive: make install writes it")
def test_a_session_started_from_python_maps_the_installations_archive(tmp_path):
    # -Xshare:on makes a JVM that cannot map its archive refuse to start instead of loading the
    # classes from the jars in silence
    env = {**os.environ, "SPARK_SUBMIT_OPTS": "-Xshare:on", "PYTHONPATH": str(REPO)}
    env.pop(WRITE_ARCHIVE, None)
    done = subprocess.run(
        [sys.executable, "-c", SESSION], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    arguments, info = done.stdout.strip().splitlines()[-2:]
    assert f"-XX:SharedArchiveFile={ARCHIVE}" in arguments.split()
    assert "sharing" in info

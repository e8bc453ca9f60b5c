"""One SparkSession per test process; small helpers to build log lines and raw frames.

``make test`` runs the suite in one process per core (pytest-xdist, ``--dist loadfile``: each
process takes whole test files, so a module's fixtures are built once); each process starts the
session once, for every test it runs. The processes share nothing else: every lake is a
temporary directory of the test's, and every server a test starts listens on a port the OS
picks (``tests.processes.free_port``).
"""

from __future__ import annotations

import io
import json
import logging
import os
import signal
from contextlib import contextmanager

import pytest

from shared.config import LabConfig

# py4j says at INFO when it closes a connection, also from a finaliser at interpreter exit, when
# a handler Airflow's logging set-up left on the root logger writes to pytest's closed capture.
logging.getLogger("py4j").setLevel(logging.WARNING)

# The JVMs of the spark-submit, lklab and Airflow processes the tests start run briefly on two cores;
# they inherit this environment (spark-submit passes SPARK_SUBMIT_OPTS to the driver's JVM). The C1
# compiler alone and the serial collector leave the cores to the work instead of to C2 compiler and
# parallel GC threads: a small `lklab batch` took about half the CPU seconds. (The session's own JVM,
# which lives the whole run, keeps C2: the `spark` fixture.)
# They also map the installation's class-data-sharing archive of the classes a Spark driver loads
# (tests/jvm_archive.py; written by make install, else first), instead of loading and verifying them
# from the jars at every start.
# The README's clean-environment test passes them on too (its environment is HOME, LANG, PATH and these).
C1_ONLY = "-XX:TieredStopAtLevel=1"
SHORT_JVM_OPTIONS = f"{C1_ONLY} -XX:+UseSerialGC"  # a JVM the tests start for a short job
if "SPARK_SUBMIT_OPTS" not in os.environ:
    from pathlib import Path

    from tests.jvm_archive import archive_options

    os.environ["SPARK_SUBMIT_OPTS"] = archive_options(SHORT_JVM_OPTIONS, Path(__file__).resolve().parents[1])


def pytest_report_header():
    return f"SPARK_SUBMIT_OPTS: {os.environ['SPARK_SUBMIT_OPTS']}"


# What a test costs, for ordering the files: a slow test (an extra process, a scheduler, a
# cluster, kill -9) takes half a minute to three; most others a second or less.
SLOW_TEST_SECONDS, TEST_SECONDS = 60, 1


def file_cost(items: list[pytest.Item]) -> int:
    """The seconds a file's tests are expected to take: ``SLOW_TEST_SECONDS`` a slow one."""
    return sum(SLOW_TEST_SECONDS if item.get_closest_marker("slow") else TEST_SECONDS for item in items)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The most expensive files first, each file's tests in their own order. The test processes
    (``make test``: pytest-xdist, ``--dist loadfile --no-loadscope-reorder``) take whole files in
    this order, each the next when it is almost done, so the cheap files come last and even out
    the processes' ends. (xdist's own order, most tests first, left the files of one or two slow
    tests to the end, where one process ran them while the other had nothing left.)"""
    by_file: dict[str, list[pytest.Item]] = {}
    for item in items:
        by_file.setdefault(item.nodeid.split("::")[0], []).append(item)
    ordered = sorted(by_file.values(), key=file_cost, reverse=True)  # stable: ties keep their order
    items[:] = [item for file_items in ordered for item in file_items]


@pytest.fixture(scope="session")
def spark(tmp_path_factory):
    from shared.spark_session import spark_session

    # This JVM lives the whole run and plans and runs hundreds of queries: it keeps the C2 compiler,
    # which the short-lived processes go without (above). A small query of the property tests took
    # 2.3-3.6 s warm with it, 4.2-6.4 s with C1 alone. The processes started later keep C1 alone.
    processes = os.environ["SPARK_SUBMIT_OPTS"]
    os.environ["SPARK_SUBMIT_OPTS"] = " ".join(o for o in processes.split() if o != C1_ONLY)
    try:
        session = spark_session(
            LabConfig(lake=tmp_path_factory.mktemp("lake"), table_engine="deltalake"), "lklab-tests"
        )
    finally:
        os.environ["SPARK_SUBMIT_OPTS"] = processes
    # One shuffle partition per core of local[2] (the lab's default is 4): the tests' frames are
    # small, and a per-key step (shared.spark_arrow.per_key repartitions to this number, which
    # adaptive execution leaves as it is) runs one wave of Python tasks instead of two. No row
    # depends on it; the jobs the tests start as processes keep the lab's setting.
    session.conf.set("spark.sql.shuffle.partitions", "2")
    yield session
    session.stop()


@contextmanager
def cli_in_this_process():
    """Around ``lklab.cli.main`` called in the tests' process: puts back afterwards what a command
    sets for the process it expects to own (the environment, the SIGTERM handler of ``lklab
    speed``, the handler its records get on the ``sys.stderr`` of that moment)."""
    environ, sigterm = dict(os.environ), signal.getsignal(signal.SIGTERM)
    records = logging.getLogger("lklab.speed")
    handlers, level, propagate = list(records.handlers), records.level, records.propagate
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(environ)
        signal.signal(signal.SIGTERM, sigterm)
        records.handlers[:] = handlers
        records.setLevel(level)
        records.propagate = propagate


@pytest.fixture
def lklab_here(monkeypatch, capsys):
    """``lklab ARGS`` as ``lklab.cli.main`` in this process, run from ``cwd`` with ``env`` added
    to the environment (both put back afterwards): a ``CompletedProcess`` with its exit code and
    what it printed on stdout and stderr. A command that runs Spark uses the session running here
    (``command_session``), when a test has started one (the ``spark`` fixture)."""
    import subprocess

    from lklab.cli import main

    def call(*args, cwd=None, env=None) -> subprocess.CompletedProcess:
        capsys.readouterr()
        with monkeypatch.context() as patched, cli_in_this_process():
            if cwd is not None:
                patched.chdir(cwd)
            os.environ.update(env or {})
            code = main(list(args))
        out, err = capsys.readouterr()
        return subprocess.CompletedProcess(["lklab", *args], code, out, err)

    return call


def event_line(**fields) -> str:
    """A valid event line; keyword arguments override (None removes a field)."""
    base = {
        "event_id": "e-1",
        "account_id": "acct-1",
        "event_type": "charge",
        "amount": "10.00",
        "currency": "USD",
        "event_time": "2026-01-05T10:00:00Z",
        "ingest_time": "2026-01-05T10:00:01Z",
    }
    base.update(fields)
    return json.dumps({k: v for k, v in base.items() if v is not None})


def read_as_the_log_does(data: bytes, max_line_bytes: int) -> list[tuple[bytes, int]]:
    """The lines of a segment holding ``data``, as the log's readers keep them (``scan_lines``):
    ``(kept bytes, length)``."""
    from shared.eventlog import scan_lines

    return [line for batch in scan_lines(io.BytesIO(data), max_line_bytes) for line in zip(*batch)]


def raw_frame(spark, lines: list, segment: int = 1):
    """Lines as the log's readers give them (``RAW_LINE_SCHEMA``), numbered from 1 within
    ``segment``: a ``bytes`` line as it is, a ``str`` in UTF-8, a ``(kept bytes, length)`` pair
    as ``read_as_the_log_does`` gives a line it cut."""
    from pyspark.sql import functions as F

    pairs = [
        line if isinstance(line, tuple) else (line if isinstance(line, bytes) else line.encode(), None)
        for line in lines
    ]
    rows = [
        (segment, number, bytearray(kept), len(kept) if length is None else length)
        for number, (kept, length) in enumerate(pairs, start=1)
    ]
    frame = spark.createDataFrame(rows, "segment long, line_number long, raw_line binary, line_bytes long")
    return frame.select("segment", "line_number", F.col("raw_line").cast("string").alias("raw_line"), "line_bytes")


@pytest.fixture
def lines_frame(spark):
    return lambda lines, segment=1: raw_frame(spark, lines, segment)

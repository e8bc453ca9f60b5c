"""One SparkSession for the whole run; small helpers to build log lines and raw frames."""

from __future__ import annotations

import json
import os

import pytest

from shared.config import LabConfig
from shared.events import RAW_LINE_SCHEMA

# The JVMs of the processes the tests launch (lklab, spark-submit, Airflow tasks; they inherit the
# environment) compile with the JIT's first tier only: each lives for seconds to a minute on small
# data, where the second tier's compiling costs more than it returns (the SIGKILL tests: 388 s
# instead of 462 s). This session's own JVM lives for the whole run and keeps both tiers (first
# tier only made the in-process transcript tests 258 s instead of 187 s). Semantics do not change.
CHILD_JVM_OPTIONS = "-XX:TieredStopAtLevel=1"
os.environ.setdefault("SPARK_SUBMIT_OPTS", CHILD_JVM_OPTIONS)


@pytest.fixture(scope="session")
def spark(tmp_path_factory):
    from shared.spark_session import spark_session

    ours = os.environ.get("SPARK_SUBMIT_OPTS") == CHILD_JVM_OPTIONS  # not a setting of the user's
    if ours:
        del os.environ["SPARK_SUBMIT_OPTS"]
    try:
        session = spark_session(LabConfig(lake=tmp_path_factory.mktemp("lake"), table_engine="deltalake"), "lklab-tests")
    finally:
        if ours:
            os.environ["SPARK_SUBMIT_OPTS"] = CHILD_JVM_OPTIONS
    yield session
    session.stop()


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


def raw_frame(spark, lines: list[str], segment: int = 1):
    """Lines as a raw log frame (``RAW_LINE_SCHEMA``), numbered from 1 within ``segment``."""
    return spark.createDataFrame(
        [(segment, number, line) for number, line in enumerate(lines, start=1)], RAW_LINE_SCHEMA
    )


@pytest.fixture
def lines_frame(spark):
    return lambda lines, segment=1: raw_frame(spark, lines, segment)

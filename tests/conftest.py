"""One SparkSession for the whole run; small helpers to build log lines and raw frames."""

from __future__ import annotations

import json
import logging

import pytest

from shared.config import LabConfig
from shared.events import RAW_LINE_SCHEMA

# py4j says at INFO when it closes a connection, also from a finaliser at interpreter exit, when
# a handler Airflow's logging set-up left on the root logger writes to pytest's closed capture.
logging.getLogger("py4j").setLevel(logging.WARNING)


@pytest.fixture(scope="session")
def spark(tmp_path_factory):
    from shared.spark_session import spark_session

    session = spark_session(LabConfig(lake=tmp_path_factory.mktemp("lake"), table_engine="deltalake"), "lklab-tests")
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

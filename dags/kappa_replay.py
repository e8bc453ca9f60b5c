"""``kappa_replay``: re-run the streaming job over the whole log under a name of its own.

Manual. ``spark_jobs/replay_job.py`` replays every segment from the first into tables
``kappa/<run_name>/...`` with a fresh checkpoint, using the run's own watermark delay and
allowed lateness, and records its cost in ``replay_runs``. The replay always replaces an
earlier replay of the same name, so a retry or a second trigger computes the same tables
again instead of failing on the first attempt's leftovers.
"""

from __future__ import annotations

import os
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk import Asset, Param, dag

SPARK_JOBS = Path(os.environ.get("LKLAB_SPARK_JOBS") or Path(__file__).resolve().parents[1] / "spark_jobs")
SPARK_CONF = {"spark.pyspark.python": sys.executable}
# delta-spark jars (table engine delta-spark), given to spark-submit --jars so the driver and the
# executors have them on their classpaths from the start.
SPARK_JARS = os.environ.get("LKLAB_DELTA_SPARK_JARS") or None
# The driver's heap (spark-submit --driver-memory); in local mode the executors share it.
DRIVER_MEMORY = os.environ.get("LKLAB_DRIVER_MEMORY") or "4g"
DURATION = r"^\d+(ms|s|m|h|d)$|^0$"

replay_runs = Asset("replay_runs")


@dag(
    schedule=None,
    start_date=datetime(2026, 1, 1, tzinfo=timezone.utc),
    catchup=False,
    default_args={"owner": "lklab", "retries": 1, "retry_delay": timedelta(minutes=2)},
    params={
        "run_name": Param(
            type="string",
            pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$",
            description="names the replay's tables: kappa/<run_name>/...",
        ),
        "watermark_delay": Param("1m", type="string", pattern=DURATION, description="e.g. 30s, 1m, 2h"),
        "allowed_lateness": Param("0s", type="string", pattern=DURATION, description="e.g. 0s, 5m"),
    },
    tags=["lklab", "kappa", "spark"],
    doc_md=__doc__,
)
def kappa_replay():
    SparkSubmitOperator(
        task_id="replay",
        application=str(SPARK_JOBS / "replay_job.py"),
        conn_id="spark_default",
        name="lklab-replay",
        application_args=[
            "--name", "{{ params.run_name }}",
            "--watermark-delay", "{{ params.watermark_delay }}",
            "--allowed-lateness", "{{ params.allowed_lateness }}",
            "--replace",
        ],
        conf=SPARK_CONF,
        jars=SPARK_JARS,
        driver_memory=DRIVER_MEMORY,
        outlets=[replay_runs],
        execution_timeout=timedelta(hours=4),
    )


kappa_replay()

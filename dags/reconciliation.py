"""``reconciliation``: the speed layer's results against the batch truth, for one UTC day.

Scheduled on the ``batch_truth`` asset: each batch recompute that succeeds starts a run for
the day it recomputed (the logical date of the batch run that emitted the event; a manual run
reconciles its own logical date). ``spark_jobs/reconcile_job.py`` diffs ``speed_aggregates``
against ``batch_truth``, explains the differences by the side outputs (late events,
duplicates, dead letters), writes ``recon_runs``, ``recon_diffs``, ``corrected_aggregates``
and ``recon_corrections``, and prints its summary as JSON, which lands in this task's log.
When the unexplained gap exceeds ``max_unexplained`` the job exits 3 and the run fails. (The
operator cannot tell exit 3 from a crash, so a breach is retried like one: the run fails after
the last retry, each attempt's log holding the summary.)

``batch_recompute`` runs one date at a time, so each batch event starts its own run here; were
several events to arrive together, the newest one's day is reconciled.
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

batch_truth = Asset("batch_truth")
recon_runs = Asset("recon_runs")

RECONCILED_DAY = (
    "{{ (triggering_asset_events.values() | first | last).source_dag_run.logical_date | ds"
    " if triggering_asset_events else ds }}"
)


@dag(
    schedule=[batch_truth],
    start_date=datetime(2026, 1, 1, tzinfo=timezone.utc),
    catchup=False,
    max_active_runs=1,
    default_args={"owner": "lklab", "retries": 2, "retry_delay": timedelta(minutes=2)},
    params={
        "max_unexplained": Param(
            "0",
            type="string",
            pattern=r"^\d+(\.\d+)?$",
            description="largest unexplained difference (money, per currency) before the run fails",
        ),
    },
    tags=["lklab", "lambda", "reconciliation", "spark"],
    doc_md=__doc__,
)
def reconciliation():
    SparkSubmitOperator(
        task_id="reconcile",
        application=str(SPARK_JOBS / "reconcile_job.py"),
        conn_id="spark_default",
        name="lklab-reconcile",
        application_args=["--date", RECONCILED_DAY, "--against", "speed", "--json", "--max-unexplained", "{{ params.max_unexplained }}"],
        conf=SPARK_CONF,
        jars=SPARK_JARS,
        driver_memory=DRIVER_MEMORY,
        outlets=[recon_runs],
        execution_timeout=timedelta(hours=1),
    )


reconciliation()

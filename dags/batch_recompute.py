"""``batch_recompute``: the Lambda batch layer's truth, one UTC day per run.

Each daily run recomputes ``batch_truth`` for its logical date (the day its data interval
starts) with ``spark_jobs/batch_job.py --date {{ ds }}`` through the ``spark_default``
connection: local Spark by default, a standalone cluster when the connection says
``spark://host:7077``. A rerun for the same date reads the log position recorded for that
date and replaces that date's rows, so retries and clears are idempotent. Success emits an
event on the ``batch_truth`` asset, which schedules ``reconciliation``.

Environment: ``AIRFLOW_CONN_SPARK_DEFAULT`` (the master), ``LKLAB_LAKE`` or ``LKLAB_CONFIG``
(read by the job itself), ``LKLAB_SPARK_JOBS`` (where ``spark_jobs/`` is, default: next to
this folder).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from airflow.sdk import CronDataIntervalTimetable, dag

from lklab.assets import batch_truth
from lklab.spark_task import spark_job


@dag(
    schedule=CronDataIntervalTimetable("0 0 * * *", timezone="UTC"),
    start_date=datetime(2026, 1, 1, tzinfo=UTC),
    catchup=False,
    # One run at a time: runs write the same table, and each run's asset event then reaches
    # reconciliation on its own.
    max_active_runs=1,
    default_args={"owner": "lklab", "retries": 2, "retry_delay": timedelta(minutes=2)},
    tags=["lklab", "lambda", "spark"],
    doc_md=__doc__,
)
def batch_recompute():
    spark_job(
        "recompute_batch_truth",
        "batch_job",
        name="lklab-batch",
        application_args=["--date", "{{ ds }}"],
        outlets=[batch_truth],
        execution_timeout=timedelta(hours=2),
    )


batch_recompute()

"""The one way a DAG runs a Spark job: ``spark-submit spark_jobs/<job>.py`` through the
``spark_default`` connection (local master unless the connection names a cluster).

Read from the environment when the DAG is parsed:

* ``LKLAB_SPARK_JOBS``: where ``spark_jobs/`` is (default: next to this package);
* ``LKLAB_DELTA_SPARK_JARS``: delta-spark jars (table engine delta-spark), given to
  ``spark-submit --jars`` so the driver and the executors have them from the start;

and the lab's ``driver-memory`` setting (``load_config``: file, then ``LKLAB_DRIVER_MEMORY``,
validated) as ``--driver-memory``; in local mode the executors share the driver's heap.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from shared.config import load_config

__all__ = ["spark_job", "spark_jobs_dir"]


def spark_jobs_dir() -> Path:
    """Where the jobs ``spark-submit`` runs are: ``LKLAB_SPARK_JOBS`` or the repository's."""
    return Path(os.environ.get("LKLAB_SPARK_JOBS") or Path(__file__).resolve().parents[1] / "spark_jobs")


def spark_job(task_id: str, job: str, application_args: list[str], **operator_args):
    """A ``SparkSubmitOperator`` for ``spark_jobs/<job>.py``; ``operator_args`` go to the operator."""
    from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

    return SparkSubmitOperator(
        task_id=task_id,
        application=str(spark_jobs_dir() / f"{job}.py"),
        conn_id="spark_default",
        application_args=application_args,
        conf={"spark.pyspark.python": sys.executable},
        jars=os.environ.get("LKLAB_DELTA_SPARK_JARS") or None,
        driver_memory=load_config().driver_memory,
        **operator_args,
    )

"""``reconciliation``: the billing_windows speed layer against ``batch_truth``, once per day each
recompute covered (``reconcile_job.py --pipeline billing_windows --date DAY``), scheduled on the
``batch_truth`` asset; a breach fails that day's task without retries. ``lklab.pipeline_dags``
makes it (``reconcile_dag``) and writes its doc."""

from __future__ import annotations

from airflow.sdk import DAG

from lklab.pipeline_dags import reconcile_dag

reconciliation: DAG = reconcile_dag("billing_windows")

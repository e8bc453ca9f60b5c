"""``batch_recompute``: the billing_windows truth (``batch_truth``), one UTC day per run
(``batch_job.py --pipeline billing_windows --date {{ ds }}``), daily at 00:00 UTC; its success
schedules ``reconciliation``. ``lklab.pipeline_dags`` makes it (``truth_dag``) and writes its doc."""

from __future__ import annotations

from airflow.sdk import DAG

from lklab.pipeline_dags import truth_dag

batch_recompute: DAG = truth_dag("billing_windows")

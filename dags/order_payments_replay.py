"""``order_payments_replay``: manual; a Kappa replay of the order_payments stream over the whole
log (``replay_job.py --pipeline order_payments --name RUN --replace``). ``lklab.pipeline_dags``
makes it and writes its doc."""

from __future__ import annotations

from airflow.sdk import DAG

from lklab.pipeline_dags import replay_dag

order_payments_replay: DAG = replay_dag("order_payments")

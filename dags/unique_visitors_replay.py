"""``unique_visitors_replay``: manual; a Kappa replay of the unique_visitors stream over the whole
log (``replay_job.py --pipeline unique_visitors --name RUN --replace``). ``lklab.pipeline_dags``
makes it and writes its doc."""

from __future__ import annotations

from airflow.sdk import DAG

from lklab.pipeline_dags import replay_dag

unique_visitors_replay: DAG = replay_dag("unique_visitors")

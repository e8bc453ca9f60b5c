"""``running_max_replay``: manual; a Kappa replay of the running_max stream over the whole log
(``replay_job.py --pipeline running_max --name RUN --replace``). ``lklab.pipeline_dags`` makes it
and writes its doc."""

from __future__ import annotations

from airflow.sdk import DAG

from lklab.pipeline_dags import replay_dag

running_max_replay: DAG = replay_dag("running_max")

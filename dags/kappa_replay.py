"""``kappa_replay``: a Kappa replay of the billing_windows speed layer over the whole log under a
name of its own (``replay_job.py --pipeline billing_windows --name RUN --replace``), manual; it
records its cost in ``replay_runs``. ``lklab.pipeline_dags`` makes it (``replay_dag``) and
writes its doc."""

from __future__ import annotations

from airflow.sdk import DAG

from lklab.pipeline_dags import replay_dag

kappa_replay: DAG = replay_dag("billing_windows")

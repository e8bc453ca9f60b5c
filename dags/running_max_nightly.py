"""``running_max_nightly``: the running_max truth from the whole log, then the speed layer
reconciled with it (``batch_job.py`` then ``reconcile_job.py``, each with ``--pipeline
running_max``); daily at 02:30 UTC. ``lklab.pipeline_dags`` makes it and writes its doc."""

from __future__ import annotations

from airflow.sdk import DAG

from lklab.pipeline_dags import nightly_dag

running_max_nightly: DAG = nightly_dag("running_max")

"""``unique_visitors_nightly``: the unique_visitors truth from the whole log, then the speed layer
reconciled with it (``batch_job.py`` then ``reconcile_job.py``, each with ``--pipeline
unique_visitors``); daily at 01:00 UTC. ``lklab.pipeline_dags`` makes it and writes its doc."""

from __future__ import annotations

from airflow.sdk import DAG

from lklab.pipeline_dags import nightly_dag

unique_visitors_nightly: DAG = nightly_dag("unique_visitors")

"""``order_payments_nightly``: the order_payments truth (matched, unpaid, orphans) from the whole
log, then the speed layer reconciled with it (``batch_job.py`` then ``reconcile_job.py``, each
with ``--pipeline order_payments``); daily at 02:00 UTC. ``lklab.pipeline_dags`` makes it and
writes its doc."""

from __future__ import annotations

from airflow.sdk import DAG

from lklab.pipeline_dags import nightly_dag

order_payments_nightly: DAG = nightly_dag("order_payments")

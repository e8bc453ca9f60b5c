"""``reconciliation``: the speed layer's results against the batch truth, for every recomputed day.

Scheduled on the ``batch_truth`` asset. ``days_covered`` lists the days of the run's
``batch_truth`` events (``lklab.batch_events``: each event's ``days`` extra, or else the logical
date of the ``batch_recompute`` run that emitted it; a run without events, manual or
``airflow dags test``, covers its own logical date), and ``reconcile`` runs once per day
(dynamic task mapping, one day at a time): ``spark_jobs/reconcile_job.py --date DAY --against
speed --json`` diffs ``speed_aggregates`` against ``batch_truth``, explains the differences by
the side outputs (late events, duplicates, dead letters), writes ``recon_runs``,
``recon_diffs``, ``corrected_aggregates`` and ``recon_corrections``, and prints its summary as
JSON, which lands in the task's log.

A breach, an unexplained gap beyond ``max_unexplained`` (the job exits 3), fails that day's task
at once, without retries, with ``BREACH`` and the job's verdict in the failure message: a rerun
would find the same gap. A crash (any other failure) is retried.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from airflow.sdk import Param, dag, task

from lklab.assets import batch_truth, recon_runs
from lklab.spark_task import mapped_spark_job

BREACH = 3  # reconcile_job's exit code: the unexplained gap exceeds --max-unexplained


@dag(
    schedule=[batch_truth],
    start_date=datetime(2026, 1, 1, tzinfo=UTC),
    catchup=False,
    max_active_runs=1,
    default_args={"owner": "lklab", "retries": 2, "retry_delay": timedelta(minutes=2)},
    params={
        "max_unexplained": Param(
            "0",
            type="string",
            pattern=r"^\d+(\.\d+)?$",
            description="largest unexplained difference (money, per currency) before a day's task fails as a breach",
        ),
    },
    tags=["lklab", "lambda", "reconciliation", "spark"],
    doc_md=__doc__,
)
def reconciliation():
    @task
    def days_covered(triggering_asset_events=None, dag_run=None, params=None) -> list[list[str]]:
        from lklab.batch_events import days_to_reconcile

        return [
            ["--date", day.isoformat(), "--against", "speed", "--json", "--max-unexplained", params["max_unexplained"]]
            for day in days_to_reconcile(triggering_asset_events, dag_run.logical_date)
        ]

    mapped_spark_job(
        "reconcile",
        "reconcile_job",
        days_covered(),
        name="lklab-reconcile",
        breach_exit_code=BREACH,
        outlets=[recon_runs],
        execution_timeout=timedelta(hours=1),
        max_active_tis_per_dagrun=1,
    )


reconciliation()

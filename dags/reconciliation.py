"""``reconciliation``: the speed layer's results against the batch truth, for one UTC day.

Scheduled on the ``batch_truth`` asset: each batch recompute that succeeds starts a run for
the day it recomputed (the logical date of the batch run that emitted the event; a manual run
reconciles its own logical date). ``spark_jobs/reconcile_job.py`` diffs ``speed_aggregates``
against ``batch_truth``, explains the differences by the side outputs (late events,
duplicates, dead letters), writes ``recon_runs``, ``recon_diffs``, ``corrected_aggregates``
and ``recon_corrections``, and prints its summary as JSON, which lands in this task's log.
When the unexplained gap exceeds ``max_unexplained`` the job exits 3: a breach, which fails the
task at once, without retries, with ``BREACH`` and the job's verdict in the failure message (a
rerun would find the same gap). A crash (any other failure) is retried.

``batch_recompute`` runs one date at a time, so each batch event starts its own run here; were
several events to arrive together, the newest one's day is reconciled.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from airflow.sdk import Asset, Param, dag

from lklab.spark_task import spark_job


batch_truth = Asset("batch_truth")
recon_runs = Asset("recon_runs")
BREACH = 3  # reconcile_job's exit code: the unexplained gap exceeds --max-unexplained

RECONCILED_DAY = (
    "{{ (triggering_asset_events.values() | first | last).source_dag_run.logical_date | ds"
    " if triggering_asset_events else ds }}"
)


@dag(
    schedule=[batch_truth],
    start_date=datetime(2026, 1, 1, tzinfo=timezone.utc),
    catchup=False,
    max_active_runs=1,
    default_args={"owner": "lklab", "retries": 2, "retry_delay": timedelta(minutes=2)},
    params={
        "max_unexplained": Param(
            "0",
            type="string",
            pattern=r"^\d+(\.\d+)?$",
            description="largest unexplained difference (money, per currency) before the run fails as a breach",
        ),
    },
    tags=["lklab", "lambda", "reconciliation", "spark"],
    doc_md=__doc__,
)
def reconciliation():
    spark_job(
        "reconcile",
        "reconcile_job",
        name="lklab-reconcile",
        application_args=["--date", RECONCILED_DAY, "--against", "speed", "--json", "--max-unexplained", "{{ params.max_unexplained }}"],
        breach_exit_code=BREACH,
        outlets=[recon_runs],
        execution_timeout=timedelta(hours=1),
    )


reconciliation()

"""``kappa_replay``: re-run the streaming job over the whole log under a name of its own.

Manual. ``spark_jobs/replay_job.py`` replays every segment from the first into tables
``kappa/<run_name>/...`` with a fresh checkpoint, using the run's own watermark delay and
allowed lateness, and records its cost in ``replay_runs``. The replay always replaces an
earlier replay of the same name, so a retry or a second trigger computes the same tables
again instead of failing on the first attempt's leftovers.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from airflow.sdk import Param, dag

from lklab.assets import replay_runs
from lklab.spark_task import spark_job

DURATION = r"^\d+(ms|s|m|h|d)$|^0$"


@dag(
    schedule=None,
    start_date=datetime(2026, 1, 1, tzinfo=UTC),
    catchup=False,
    default_args={"owner": "lklab", "retries": 1, "retry_delay": timedelta(minutes=2)},
    params={
        "run_name": Param(
            type="string",
            pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$",
            description="names the replay's tables: kappa/<run_name>/...",
        ),
        "watermark_delay": Param("1m", type="string", pattern=DURATION, description="e.g. 30s, 1m, 2h"),
        "allowed_lateness": Param("0s", type="string", pattern=DURATION, description="e.g. 0s, 5m"),
    },
    tags=["lklab", "kappa", "spark"],
    doc_md=__doc__,
)
def kappa_replay():
    spark_job(
        "replay",
        "replay_job",
        name="lklab-replay",
        application_args=[
            "--name",
            "{{ params.run_name }}",
            "--watermark-delay",
            "{{ params.watermark_delay }}",
            "--allowed-lateness",
            "{{ params.allowed_lateness }}",
            "--replace",
        ],
        outlets=[replay_runs],
        execution_timeout=timedelta(hours=4),
    )


kappa_replay()

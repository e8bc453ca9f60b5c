"""``speed_layer_health``: every five minutes, is the always-on speed layer keeping up?

The speed layer is a service (``spark_jobs/speed_job.py`` under spark-submit), not a task.
This check reads its ``stream_metrics`` table and the log with delta-rs (no Spark) and fails
the run, with what it saw in the task log, when the stream is stalled (no micro-batch for
``max_staleness`` while segments wait) or lagging (watermark lag over ``max_watermark_lag``),
or has never committed. ``lklab.health`` holds the rules. The lake is the configured one
(``LKLAB_LAKE`` / ``LKLAB_CONFIG``).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from airflow.sdk import CronTriggerTimetable, Param, dag, task

DURATION = r"^\d+(ms|s|m|h|d)$"


@dag(
    schedule=CronTriggerTimetable("*/5 * * * *", timezone="UTC"),
    start_date=datetime(2026, 1, 1, tzinfo=UTC),
    catchup=False,
    max_active_runs=1,
    # A failed check is the alarm; one quick retry rides out a read that raced a commit.
    default_args={"owner": "lklab", "retries": 1, "retry_delay": timedelta(seconds=30)},
    dagrun_timeout=timedelta(minutes=4),
    params={
        "max_staleness": Param(
            "10m", type="string", pattern=DURATION, description="longest time without a micro-batch while segments wait"
        ),
        "max_watermark_lag": Param(
            "15m", type="string", pattern=DURATION, description="largest watermark lag of the newest micro-batch"
        ),
    },
    tags=["lklab", "lambda", "monitoring"],
    doc_md=__doc__,
)
def speed_layer_health():
    @task
    def check_stream_metrics(params=None) -> dict:
        from lklab.health import require_healthy_stream

        health = require_healthy_stream(
            max_staleness=params["max_staleness"], max_watermark_lag=params["max_watermark_lag"]
        )
        print(health.describe())
        return health.as_dict()

    check_stream_metrics()


speed_layer_health()

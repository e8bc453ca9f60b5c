"""``speed_layer_health``: every five minutes, is every live stream keeping up?

A live stream is a service (``spark_jobs/speed_job.py`` under spark-submit), not a task. This
check reads each stream's table of one row per micro-batch and the log with delta-rs (no Spark)
and fails the run, with what it saw of every stream in the task log, when one is stalled (no
micro-batch for ``max_staleness`` while segments wait), lagging (watermark lag over
``max_watermark_lag``), slow (behind, and a micro-batch of the last ``latency_window`` had its
lines' p95 live latency over ``max_latency``) or has never committed. The streams checked are the default pipeline's
and every other pipeline's that has committed in the lake (``lklab.health.watched_streams``);
``lklab.health`` holds the rules. The lake is the configured one (``LKLAB_LAKE`` /
``LKLAB_CONFIG``).
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
        "max_latency": Param(
            "2m", type="string", pattern=DURATION, description="largest p95 live latency of a recent micro-batch"
        ),
        "latency_window": Param(
            "10m", type="string", pattern=DURATION, description="how far back the live latency is checked"
        ),
    },
    tags=["lklab", "lambda", "monitoring"],
    doc_md=__doc__,
)
def speed_layer_health():
    @task
    def check_stream_metrics(params=None) -> list[dict]:
        from lklab.health import require_healthy_streams

        checked = require_healthy_streams(
            max_staleness=params["max_staleness"],
            max_watermark_lag=params["max_watermark_lag"],
            max_latency=params["max_latency"],
            latency_window=params["latency_window"],
        )
        print("\n".join(health.describe() for health in checked))
        return [health.as_dict() for health in checked]

    check_stream_metrics()


speed_layer_health()

"""``lake_maintenance``: compaction and VACUUM of the always-on tables, daily.

Every day at 03:00 UTC (after the night's ``batch_recompute`` and its reconciliation),
``lklab.maintenance.maintain_lake`` compacts the small files the live streams and reconciliation
leave behind (billing's ``speed_aggregates``, ``late_events``, ``duplicate_events``,
``dead_letter``, ``stream_metrics``, ``stream_state``; the ``unique_visitors`` stream's
``visitors_*`` and the ``order_payments`` stream's ``payments_*`` tables; ``recon_runs``,
``recon_diffs``, ``recon_corrections``) and VACUUMs them with the ``retention`` param: every
version committed within it stays readable (time travel), older ones may not. It runs with
delta-rs alone (no Spark), on the configured lake (``LKLAB_LAKE`` / ``LKLAB_CONFIG``), under the
lake's ``maintenance`` lock; tables a live stream rewrites in place are compacted only while it
is stopped; a pipeline's tables not in the lake are skipped. ``lklab maintain`` does the same
from the command line.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from airflow.sdk import CronTriggerTimetable, Param, dag, task


@dag(
    schedule=CronTriggerTimetable("0 3 * * *", timezone="UTC"),
    start_date=datetime(2026, 1, 1, tzinfo=UTC),
    catchup=False,
    max_active_runs=1,
    # A retry rides out another maintenance holding the lake's lock.
    default_args={"owner": "lklab", "retries": 1, "retry_delay": timedelta(minutes=10)},
    dagrun_timeout=timedelta(hours=2),
    params={
        "retention": Param(
            "7d",
            type="string",
            pattern=r"^\d+(h|d)$",
            description="time travel stays possible this far back (1h to 30d)",
        ),
    },
    tags=["lklab", "maintenance"],
    doc_md=__doc__,
)
def lake_maintenance():
    @task
    def compact_and_vacuum(params=None) -> dict:
        from lklab.maintenance import maintain_lake

        done = maintain_lake(retention=params["retention"])
        print(done.describe())
        return done.as_dict()

    compact_and_vacuum()


lake_maintenance()

"""``billing_windows``: exact money per account, currency and event-time window.

The lab's first pipeline and its default. Its rule is the engine's windowed aggregation
(``shared.events``, ``shared.speed``, ``shared.stream_windows``, ``shared.batch_chain``); this
package holds what it declares to the runners: ``speed`` (its ``StreamRule``, with a parallel
``whole_log`` for the replay), ``batch`` (its ``TruthRule``: the truth, day by day), ``replay``
(the whole-log computation and ``replay_runs``), ``reconcile`` (its ``ReconcileRule``, whose
rule is ``reconciliation.reconcile``); ``comparison`` with ``assessment`` and ``measure``
(``lklab compare``), ``advice`` (``lklab advise``), ``generator`` and ``truth`` (the scenarios and their NumPy oracle),
``summary`` and ``agreement``. ``jobs`` declares what its commands run, as every pipeline does;
``PIPELINE`` declares it to the registry, its DAGs included (made by ``lklab.pipeline_dags``).
"""

from __future__ import annotations

from lklab.pipelines.contract import Advising, Comparison, DagSpec, Inapplicable, Pipeline, Setting
from reconciliation.tables import RECON_RUNS
from shared import catalog

__all__ = ["PIPELINE"]


def _jobs():
    from lklab.pipelines.billing_windows import jobs

    return jobs.jobs()


def _stream():
    from lklab.pipelines.billing_windows.speed import SPEED_RULE

    return SPEED_RULE


def _lines():
    """Its lines, for ``lklab ingest``: the checks every line gets, its fields and its event time
    (its parser, ``shared.events``, runs in Spark)."""
    from lklab.line_preview import fields_only
    from shared.events import REQUIRED_FIELDS

    return fields_only(REQUIRED_FIELDS)


def _compare(spark, config, plan, sweeps, source, progress):
    from lklab.pipelines.billing_windows import jobs

    return jobs.compare(spark, config, plan, sweeps, source, progress)


def _prepare_comparison(config, scenario):
    from lklab.pipelines.billing_windows import jobs

    return jobs.prepare_comparison(config, scenario)


def _unreplaceable(lake):
    from lklab.pipelines.billing_windows import jobs

    return jobs.unreplaceable(lake)


def _publish(report, directory):
    from lklab.pipelines.billing_windows import jobs

    return jobs.publish_comparison(report, directory)


def _advisor_log(spark, config, allowed_lateness, progress):
    from lklab.pipelines.billing_windows import advice

    return advice.advisor_log(spark, config, allowed_lateness, progress)


def _advise_check(config):
    from lklab.pipelines.billing_windows import advice

    advice.check(config)


def _advise_prepare(config):
    from lklab.pipelines.billing_windows import advice

    return advice.prepare(config)


PIPELINE = Pipeline(
    name="billing_windows",
    lines=_lines,
    dags=DagSpec(
        nightly_at="0 0 * * *",  # the day before is complete at midnight UTC
        truth=(catalog.BATCH_TRUTH,),
        batch_tables=(catalog.BATCH_TRUTH, catalog.BATCH_DUPLICATES, catalog.BATCH_DEAD_LETTER),
        reconcile_writes="writes recon_runs, recon_diffs, corrected_aggregates and recon_corrections",
        reconciled=(RECON_RUNS,),
        replayed=(catalog.REPLAY_RUNS,),
        by_day=True,
        # the lab's first DAGs keep their names
        dag_ids={"truth": "batch_recompute", "reconcile": "reconciliation", "replay": "kappa_replay"},
    ),
    stream=_stream,
    inapplicable=(
        Inapplicable(
            ("--speed-step",),
            ("generate", "batch", "replay", "reconcile", "advise"),
            "only a live speed layer (speed, compare, demo) has a step to place",
        ),
    ),
    settings=(
        Setting(
            "speed-step",
            "where the live speed layer's step runs: driver (in the driver process, against the state "
            "it carries) or executors (in the streaming query, its state in Spark's RocksDB state store); "
            "default driver",
        ),
    ),
    computes="windowed sums: exact money per account, currency and event-time window",
    jobs=_jobs,
    compare=Comparison(
        run=_compare,
        prepare=_prepare_comparison,
        generates=_unreplaceable,
        processing_time=True,
        publish=_publish,
    ),
    advise=Advising(read=_advisor_log, check=_advise_check, prepare=_advise_prepare),
)

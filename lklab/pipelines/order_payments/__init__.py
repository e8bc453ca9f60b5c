"""``order_payments``: the interval join of orders and payments (matched, unpaid, orphans).

Its line format (``parse``), rule (``rule``), state (``state``), metrics, truth (``batch``,
``truth`` for the tests' oracle), reconciliation rule (``reconcile_rule``, ``reconcile``, the
finance ``audit``), generator, stream (``stream``: live and replay), comparison and command
handlers (``jobs``) live in this package; ``PIPELINE`` declares it to the registry.
"""

from __future__ import annotations

from lklab.pipelines.contract import Comparison, DagSpec, Inapplicable, Pipeline, Setting, called, imported
from lklab.pipelines.order_payments.tables import (
    PAYMENTS_BATCH_TABLES,
    PAYMENTS_TRUTH_MATCHED,
    PAYMENTS_TRUTH_ORPHANS,
    PAYMENTS_TRUTH_UNPAID,
)
from lklab.pipelines.whole_log import WHOLE_LOG_RULES

__all__ = ["PIPELINE"]


def _compare(spark, config, plan, sweeps, source, progress):
    from lklab.pipelines.order_payments.comparison import run_payments_comparison

    return run_payments_comparison(spark, config, plan, source=source, progress=progress)


PIPELINE = Pipeline(
    name="order_payments",
    lines=called("lklab.pipelines.order_payments.parse:line_format"),
    stream=imported("lklab.pipelines.order_payments.stream:PAYMENTS_RULE"),
    computes="the interval join of orders and payments (matched, unpaid, orphans)",
    settings=(Setting("join-bound", "a payment matches an order up to this long after it (default 15m)"),),
    inapplicable=(
        *WHOLE_LOG_RULES,
        Inapplicable(
            ("--scenario", "--accounts"),
            ("generate",),
            "its generator has one traffic shape (--events orders, their payments, gateway retries, offline "
            "clients, a regional outage)",
        ),
        Inapplicable(
            ("--window-kind", "--window-size", "--window-slide", "--session-gap"),
            ("*",),
            "the interval join has no windows (a payment's interval is --join-bound)",
        ),
    ),
    jobs=called("lklab.pipelines.order_payments.jobs:jobs"),
    compare=Comparison(run=_compare),
    dags=DagSpec(
        nightly_at="0 2 * * *",
        truth=(PAYMENTS_TRUTH_MATCHED, PAYMENTS_TRUTH_UNPAID, PAYMENTS_TRUTH_ORPHANS),
        batch_tables=PAYMENTS_BATCH_TABLES,
        reconcile_writes="writes the finance audit `reports/payments-<UTC time>/payments_audit.csv` (no table)",
        # the join bound is the truth's: a replay with another one could not be reconciled
    ),
)

"""``unique_visitors``: distinct URLs per user and fixed window, with a state TTL.

Its line format (``parse``), rule (``rule``, ``step``), state (``state``), metrics, truth
(``batch``, ``truth`` for the tests' oracle), reconciliation rule (``reconcile_rule``,
``reconcile``), generator, stream (``speed``, ``replay``), comparison and jobs
(``jobs``) live in this package; ``PIPELINE`` declares it to the registry.
"""

from __future__ import annotations

from lklab.pipelines.contract import Comparison, DagSpec, Pipeline, Setting, called, imported
from lklab.pipelines.unique_visitors.tables import VISITORS_BATCH_TABLES, VISITORS_CORRECTED, VISITORS_TRUTH
from lklab.pipelines.whole_log import WHOLE_LOG_RULES

__all__ = ["PIPELINE"]


def _compare(spark, config, plan, sweeps, source, progress):
    from lklab.pipelines.unique_visitors.comparison import run_visitors_comparison

    return run_visitors_comparison(
        spark, config, plan, state_ttls=sweeps.get("state-ttl", ()), source=source, progress=progress
    )


def _check(config) -> None:
    from lklab.pipelines.unique_visitors.rule import require_fixed

    require_fixed(config.window)


PIPELINE = Pipeline(
    name="unique_visitors",
    lines=called("lklab.pipelines.unique_visitors.parse:line_format"),
    stream=imported("lklab.pipelines.unique_visitors.speed:VISITORS_RULE"),
    computes="distinct URLs per user and window",
    settings=(Setting("state-ttl", "how long a URL seen by a user stays in the stream's state (default 24h)"),),
    inapplicable=WHOLE_LOG_RULES,
    jobs=called("lklab.pipelines.unique_visitors.jobs:jobs"),
    compare=Comparison(run=_compare, sweeps=("state-ttl",), check=_check),
    dags=DagSpec(
        nightly_at="0 1 * * *",
        truth=(VISITORS_TRUTH,),
        batch_tables=VISITORS_BATCH_TABLES,
        reconcile_writes=f"appends each window's served, corrected and true counts and verdict to "
        f"`{VISITORS_CORRECTED.name}` (nothing when the same inputs were already reconciled)",
        reconciled=(VISITORS_CORRECTED,),
    ),
)

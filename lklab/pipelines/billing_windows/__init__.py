"""``billing_windows``: exact money per account, currency and event-time window.

The lab's first pipeline and its default. Its rule is the engine's windowed aggregation
(``shared.events``, ``shared.speed``, ``shared.stream_windows``, ``shared.batch_chain``); this
package holds its jobs: ``speed`` (its ``StreamRule``), ``batch`` (the truth, day by day),
``replay`` (the Kappa replay on the executors), ``comparison`` with ``assessment`` and
``measure`` (``lklab compare``), ``generator`` and ``truth`` (the scenarios and their NumPy
oracle), ``summary`` and ``agreement``. The commands' own handlers (``lklab.cli``) run them,
so it declares no jobs of its own; its reconciliation is ``reconciliation.reconcile``.
"""

from __future__ import annotations

from lklab.pipelines.contract import Pipeline

__all__ = ["PIPELINE"]


def _stream():
    from lklab.pipelines.billing_windows.speed import SPEED_RULE

    return SPEED_RULE


PIPELINE = Pipeline(
    name="billing_windows",
    stream=_stream,
    computes="windowed sums: exact money per account, currency and event-time window",
    command_handlers=True,
)

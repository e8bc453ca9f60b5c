"""``billing_windows``: exact money per account, currency and event-time window.

The lab's first pipeline. Its rule is the engine's windowed aggregation (``shared.events``,
``shared.speed``, ``shared.stream_windows``, ``shared.batch_chain``); its runners are the commands'
own (``lklab.speed_layer``, ``lklab.batch_recompute``, ``lklab.kappa_replay``,
``reconciliation.reconcile``, ``lklab.experiment``), so it lists no command handlers of its own.
"""

from __future__ import annotations

from lklab.pipelines.contract import Pipeline

__all__ = ["PIPELINE"]


def _stream():
    from lklab.speed_layer import SPEED_RULE

    return SPEED_RULE


PIPELINE = Pipeline(
    name="billing_windows",
    stream=_stream,
    computes="windowed sums: exact money per account, currency and event-time window",
    command_handlers=True,
)

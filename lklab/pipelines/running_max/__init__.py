"""``running_max``: the maximum reading per key, the contract's smallest pipeline.

It is here to show what a pipeline is: what differs, in one package, and a line in the
registry. ``parse`` (its line format and checks), ``rule`` (the step and its state), ``tables``,
``stream`` (its ``StreamRule`` for the live runner), ``truth`` (its ``TruthRule``), ``reconcile``
(the keyed diff and its one explanation), ``generator`` and ``jobs``. Every job runs through
a runner that knows no pipeline: ``lklab.live_stream``, ``lklab.replay_runner``,
``lklab.truth_runner``, ``reconciliation.keyed_diff``.
"""

from __future__ import annotations

from lklab.pipelines.contract import DagSpec, Inapplicable, Pipeline, called
from lklab.pipelines.running_max.tables import MAX_BATCH_TABLES, MAX_TRUTH
from lklab.pipelines.whole_log import WHOLE_LOG_RULES

__all__ = ["PIPELINE"]


def _jobs():
    from lklab.pipelines.running_max import jobs

    return jobs.jobs()


def _stream():
    from lklab.pipelines.running_max.stream import MAX_RULE

    return MAX_RULE


PIPELINE = Pipeline(
    name="running_max",
    lines=called("lklab.pipelines.running_max.parse:line_format"),
    stream=_stream,
    computes="the maximum reading per key (the smallest pipeline: docs/adding-a-pipeline.md)",
    inapplicable=(
        *WHOLE_LOG_RULES,
        Inapplicable(
            (
                "--window-kind",
                "--window-size",
                "--window-slide",
                "--session-gap",
                "--watermark-delay",
                "--allowed-lateness",
                "--dedup-horizon",
            ),
            ("*",),
            "a running maximum has no windows and no watermark, and remembers every event id",
        ),
        Inapplicable(("--scenario", "--span"), ("generate",), "its generator has one shape: a reading a second"),
    ),
    jobs=_jobs,
    dags=DagSpec(
        nightly_at="30 2 * * *",  # after order_payments (02:00), before maintenance (03:00)
        truth=(MAX_TRUTH,),
        batch_tables=MAX_BATCH_TABLES,
        reconcile_writes="prints the keyed diff of stream and truth and what explains it (no table)",
        replay_settings=(),  # its stream has no settings of its own: a replay is the log once more
    ),
)

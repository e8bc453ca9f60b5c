"""A declared pipeline as the command line sees every pipeline: a ``Pipeline`` built from its ``Declaration``.

``pipeline_of(d)`` gives it its name, what it computes (from the declaration: its keys, measures
and windows), its stream (``stream.stream_rule``), its tables by role (``lklab tables``) and its jobs (``jobs.jobs_of``): ``speed``,
``batch``, ``replay`` and ``reconcile`` run through the same handlers and runners as the
registered pipelines'. It has no comparison yet; its DAGs are made from its name alone
(``lklab.pipeline_dags.PipelineDags.declared``). The windows and stream settings are
the declaration's: the flags that would set them, and their environment variables, are refused,
saying where to change them.
"""

from __future__ import annotations

from functools import partial

from lklab.pipelines.contract import Inapplicable, Pipeline
from lklab.pipelines.declared.declaration import Declaration
from lklab.pipelines.whole_log import WHOLE_LOG_RULES
from shared.config import SECTIONS

__all__ = ["pipeline_of", "DECLARED_FLAGS"]

DECLARED_FLAGS = (
    "--window-kind",
    "--window-size",
    "--window-slide",
    "--session-gap",
    "--watermark-delay",
    "--watermark-interval",
    "--allowed-lateness",
    "--dedup-horizon",
    "--heartbeat-interval",
    "--max-clock-skew",
    "--max-line-bytes",
)


def _computes(d: Declaration) -> str:
    sums = f" and the sums of {', '.join(m.name for m in d.measures)}" if d.measures else ""
    return f"declared: the count{sums} per {', '.join(d.keys)} and {d.window.describe()} window"


def _jobs(d: Declaration):
    from lklab.pipelines.declared.jobs import jobs_of

    return jobs_of(d)


def _stream(d: Declaration):
    from lklab.pipelines.declared.stream import stream_rule

    return stream_rule(d)


def _tables(d: Declaration) -> dict:
    from lklab.pipelines.declared.tables import tables_of

    t = tables_of(d)
    return {
        "truth": t.truth,
        "stream": t.windows,
        "late": t.late,
        "duplicates": t.duplicates,
        "dead_letters": t.dead_letter,
        "stream_metrics": t.stream_metrics,
        "stream_state": t.stream_state,
        "batch_duplicates": t.batch_duplicates,
        "batch_dead_letters": t.batch_dead_letter,
    }


def pipeline_of(d: Declaration) -> Pipeline:
    """The ``Pipeline`` of the pipeline ``d`` declares."""
    return Pipeline(
        name=d.name,
        computes=_computes(d),
        inapplicable=(
            *WHOLE_LOG_RULES,
            Inapplicable(
                DECLARED_FLAGS,
                ("*",),
                f"a declared pipeline's windows and stream settings are its declaration's: edit [{SECTIONS}.{d.name}]",
                environment=True,
            ),
        ),
        jobs=partial(_jobs, d),
        stream=partial(_stream, d),
        tables=partial(_tables, d),
    )

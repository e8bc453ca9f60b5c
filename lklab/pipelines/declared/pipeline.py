"""A declared pipeline as the command line sees every pipeline: a ``Pipeline`` built from its ``Declaration``.

``pipeline_of(d)`` gives it its name, what it computes (from the declaration: its keys, measures
and windows), its stream (``stream.stream_rule``), its tables by role (``lklab tables``) and its jobs (``jobs.jobs_of``): ``speed``,
``batch``, ``replay`` and ``reconcile`` run through the same handlers and runners as the
registered pipelines'. ``lklab compare`` sweeps its watermark delay and allowed lateness
(``comparison``; by default the declaration's own delay, without and with lateness), and ``lklab
advise`` reads its log for the watermark advisor (``advice``: fixed windows only); its DAGs are made from its name alone
(``lklab.pipeline_dags.PipelineDags.declared``). The windows and stream settings are
the declaration's: the flags that would set them, and their environment variables, are refused,
saying where to change them.
"""

from __future__ import annotations

from functools import partial

from lklab.pipelines.contract import Advising, Comparison, Inapplicable, LineFormat, Pipeline
from lklab.pipelines.declared.declaration import Declaration
from lklab.pipelines.whole_log import WHOLE_LOG_RULES
from shared.config import SECTIONS
from shared.durations import format_duration

__all__ = ["pipeline_of", "DECLARED_FLAGS", "SWEPT_FLAGS"]

SWEPT_FLAGS = ("--watermark-delay", "--allowed-lateness")  # compare sweeps them; elsewhere the declaration's
DECLARED_FLAGS = (
    "--window-kind",
    "--window-size",
    "--window-slide",
    "--session-gap",
    "--watermark-interval",
    "--dedup-horizon",
    "--heartbeat-interval",
    "--max-clock-skew",
    "--max-line-bytes",
)
# Every command but compare: the lake's and every pipeline job.
_NOT_SWEPT = ("demo", "generate", "ingest", "batch", "speed", "replay", "reconcile", "health", "tables", "maintain")


def _computes(d: Declaration) -> str:
    sums = f" and the sums of {', '.join(m.name for m in d.measures)}" if d.measures else ""
    return f"declared: the count{sums} per {', '.join(d.keys)} and {d.window.describe()} window"


def _jobs(d: Declaration):
    from lklab.pipelines.declared.jobs import jobs_of

    return jobs_of(d)


def _compare(d: Declaration, spark, config, plan, sweeps, source, progress):
    from lklab.pipelines.declared.comparison import run_declared_comparison

    return run_declared_comparison(d, spark, config, plan, source=source, progress=progress)


def _check_compare(d: Declaration, config) -> None:
    from lklab.pipelines.declared.window_counts import fixed_windows

    fixed_windows(d, "lklab compare")


def _advisor_log(d: Declaration, spark, config, allowed_lateness, progress):
    from lklab.pipelines.declared.advice import advisor_log

    return advisor_log(d, spark, config, allowed_lateness, progress)


def _check_advise(d: Declaration, config) -> None:
    from lklab.pipelines.declared.advice import check

    check(d)


def _sweep(d: Declaration) -> tuple[str, str]:
    """The declaration's watermark delay; no allowed lateness, then the declaration's (or one window's length)."""
    lateness = d.allowed_lateness or getattr(d.window, "size", 0)
    return format_duration(d.watermark_delay), ",".join(dict.fromkeys(["0", format_duration(lateness)]))


def _lines(d: Declaration) -> LineFormat:
    from lklab.pipelines.declared.parse import parse_declared_lines

    fields = (d.event_id, *d.keys, *(m.name for m in d.measures), d.event_time)  # the ingest time may be stamped
    return LineFormat(
        fields, lambda raw, config: parse_declared_lines(d, raw), exact=True, max_line_bytes=d.max_line_bytes
    )


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
    edit = f"a declared pipeline's windows and stream settings are its declaration's: edit [{SECTIONS}.{d.name}]"
    return Pipeline(
        name=d.name,
        computes=_computes(d),
        inapplicable=(
            *WHOLE_LOG_RULES,
            Inapplicable(DECLARED_FLAGS, ("*",), edit, environment=True),
            Inapplicable(SWEPT_FLAGS, _NOT_SWEPT, f"{edit} ('lklab compare' sweeps them)", environment=True),
        ),
        compare=Comparison(
            run=partial(_compare, d),
            check=partial(_check_compare, d),
            sweep=_sweep(d),
            writes_log=f"'lklab ingest --pipeline {d.name} FILE...'",
        ),
        advise=Advising(read=partial(_advisor_log, d), check=partial(_check_advise, d)),
        jobs=partial(_jobs, d),
        stream=partial(_stream, d),
        tables=partial(_tables, d),
        lines=partial(_lines, d),
    )

"""``report.html`` of a pipeline comparison: the page of billing's report, for ``PipelineReport``.

It extends billing's layout (``templates/page.html.j2``: its styles, no script, a
Content-Security-Policy that loads nothing but ``data:`` images) and renders through the same
escaping environment (``html.TEMPLATES``). Its words, tables and verdicts are
``pipeline_tables``', the ones ``summary.md`` prints; the error plot is the PNG written beside it,
embedded as a ``data:`` URI and linked.
"""

from __future__ import annotations

import base64
import os

from . import formats
from .html import TEMPLATES
from .pipeline_model import PipelineReport
from .pipeline_tables import (
    audit_links,
    clock_sentence,
    log_sentence,
    side_by_side,
    state_by_ttl,
    stream_checks,
    verdict_line,
)

__all__ = ["render_pipeline_html"]


def render_pipeline_html(report: PipelineReport, error_plot: bytes, directory: str | os.PathLike | None = None) -> str:
    """The page as a string (UTF-8 when written); ``error_plot``: the PNG of ``error_over_time.png``;
    ``directory``: where the page goes, which the audit links are relative to."""
    return TEMPLATES.get_template("pipeline_report.html.j2").render(
        report=report,
        formats=formats,
        log_sentence=log_sentence(report),
        clock_sentence=clock_sentence(report),
        tables={"side_by_side": side_by_side(report), "state": state_by_ttl(report), "streams": stream_checks(report)},
        verdict_lines=[verdict_line(report, r) for r in report.results],
        audits=audit_links(report, directory),
        error_plot="data:image/png;base64," + base64.b64encode(error_plot).decode("ascii"),
    )

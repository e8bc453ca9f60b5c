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

from . import formats, plots
from . import pipeline_tables as sections
from .decision import decide, headline_table
from .html import TEMPLATES, _svg
from .pipeline_model import PipelineReport

__all__ = ["render_pipeline_html"]


def render_pipeline_html(report: PipelineReport, error_plot: bytes, directory: str | os.PathLike | None = None) -> str:
    """The page as a string (UTF-8 when written); ``error_plot``: the PNG of ``error_over_time.png``;
    ``directory``: where the page goes, which the audit links are relative to."""
    decision = decide(report)
    return TEMPLATES.get_template("pipeline_report.html.j2").render(
        report=report,
        decision=decision,
        headline=headline_table(decision),
        decision_plot=_svg(plots.decision_curve(decision)),
        formats=formats,
        log_sentence=sections.log_sentence(report),
        clock_sentence=sections.clock_sentence(report),
        tables={
            "side_by_side": sections.side_by_side(report),
            "state": sections.state_by_ttl(report),
            "streams": sections.stream_checks(report),
        },
        verdict_lines=[sections.verdict_line(report, r) for r in report.results],
        audits=sections.audit_links(report, directory),
        error_plot="data:image/png;base64," + base64.b64encode(error_plot).decode("ascii"),
    )

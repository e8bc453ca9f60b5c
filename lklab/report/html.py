"""``report.html``: one self-contained page that opens from disk with no network.

Styles are inline, figures are inline SVG, and there is no script at all; a
Content-Security-Policy forbids loading anything else, so a stray external reference shows up
as a blocked load instead of a silent request. All text from the data is escaped. Long tables
sit in ``<details>``; the audit lists the largest events and points to the CSV for all of them.

The markup is in ``templates/`` (``report.html.j2`` on the layout every report page shares,
``page.html.j2``; one macro per section in ``sections.html.j2``; ``report.css``); this module
computes what they show and renders them.
"""

from __future__ import annotations

from html import escape

from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape
from markupsafe import Markup

from . import formats, plots
from .comparison import compare
from .decision import decide, headline_table
from .model import Report

__all__ = ["AUDIT_ROWS_SHOWN", "GAP_ACCOUNTS", "GAP_WINDOWS", "TEMPLATES", "render_html"]

AUDIT_ROWS_SHOWN = 200
GAP_ACCOUNTS, GAP_WINDOWS = 10, 30
"""A heat map shows at most this many accounts, and this many of their windows, per currency."""


def _escaped(value: object) -> Markup:
    """What a template prints for ``value``: escaped as ``html.escape`` does (``&quot;``,
    ``&#x27;``), unless it is already markup (the SVG figures, the sections' macros).

    Jinja's autoescape would escape with MarkupSafe's entities (``&#34;``, ``&#39;``); the same
    meaning, but the page has always used the standard library's, and its readers match them."""
    return value if isinstance(value, Markup) else Markup(escape(str(value), quote=True))


# Every report page renders through this environment (``pipeline_html`` too), so all escape alike.
TEMPLATES = Environment(
    loader=PackageLoader("lklab.report", "templates"),
    # Autoescape stays on behind ``finalize``: a value that bypasses it (a constant folded at
    # compile time, a ``join`` filter) is still escaped, with MarkupSafe's entities.
    autoescape=select_autoescape(["html.j2"]),
    finalize=_escaped,
    undefined=StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
    keep_trailing_newline=True,
)


def _svg(svg: str | None) -> Markup | None:
    """A figure from ``plots``: SVG that matplotlib wrote and escaped, placed as it is."""
    return None if svg is None else Markup(svg)


def _error_caption(report: Report) -> str:
    text = (
        f"Sampled every {report.error_step} of processing time: windows wrong and money wrong per currency, "
        "log scale above 1 (Lambda solid, Kappa dashed, processing-time windows dotted; a Lambda line lies on "
        "Kappa's at L=0 until its batch lands)."
    )
    later = [t for t in report.nightly_landings if report.log_end is not None and t > report.log_end]
    if later:
        lambdas = [r for r in report.results if r.configuration.architecture == "lambda" and r.error_series]
        wrong = "; ".join(
            f"{r.configuration.label}: {formats.count(r.error_series[-1].windows_wrong)}" for r in lambdas
        )
        text += (
            f" The axis ends after the log's last line; Lambda's nightly recompute lands later, at "
            f"{', '.join(formats.utc(t) for t in later)}; windows wrong at the end ({formats.utc(report.end)}): {wrong}."
        )
    return text


def _maps_by_configuration(report: Report) -> list[tuple[str, list]]:
    """The heat maps grouped by configuration, in the report's order (one figure each)."""
    grouped: dict[str, list] = {}
    for heat_map in report.heat_maps:
        grouped.setdefault(heat_map.configuration_key, []).append(heat_map)
    return [(c.key, grouped[c.key]) for c in report.configurations if c.key in grouped]


def render_html(report: Report, audit_rows_shown: int = AUDIT_ROWS_SHOWN) -> str:
    """The report page as a string (UTF-8 when written)."""
    labels = {c.key: c.label for c in report.configurations}
    decision = decide(report)
    return TEMPLATES.get_template("report.html.j2").render(
        report=report,
        decision=decision,
        headline=headline_table(decision),
        decision_plot=_svg(plots.decision_curve(decision)),
        comparison=compare(report),
        formats=formats,
        plots={
            "gaps": [
                (
                    report.result(key).configuration.label,
                    ", ".join(f"{m.currency} {formats.count(len(m.cells))}" for m in maps),
                    _svg(plots.gap_heat_map(maps, f"plot-gaps-{n}", GAP_ACCOUNTS, GAP_WINDOWS)),
                )
                for n, (key, maps) in enumerate(_maps_by_configuration(report))
            ],
            "tradeoff": _svg(plots.watermark_tradeoff(report)),
            "error": _svg(plots.error_over_time(report)),
            "arrival": _svg(plots.arrival_delay_cdf(report)),
        },
        error_caption=_error_caption(report),
        gap_accounts=GAP_ACCOUNTS,
        gap_windows=GAP_WINDOWS,
        unexplained_in=[
            r.configuration.label for r in report.results if r.reconciliation and not r.reconciliation.explained
        ],
        labels=labels,
        currency_totals=sorted(report.audit.currency_totals(), key=lambda t: list(labels).index(t.configuration)),
        audit_rows_shown=audit_rows_shown,
    )

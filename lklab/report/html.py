"""``report.html``: one self-contained page that opens from disk with no network.

Styles are inline, figures are inline SVG, and there is no script at all; a
Content-Security-Policy forbids loading anything else, so a stray external reference shows up
as a blocked load instead of a silent request. All text from the data is escaped. Long tables
sit in ``<details>``; the audit lists the largest events and points to the CSV for all of them.
"""

from __future__ import annotations

from html import escape

from . import formats, plots
from .audit import FinanceAudit
from .comparison import Comparison, compare
from .model import Report

__all__ = ["AUDIT_ROWS_SHOWN", "render_html"]

AUDIT_ROWS_SHOWN = 200
_WINNER = ' class="winner" title="best in this row"'

_CSS = """
body{font:15px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;color:#1d1d1f;margin:0 auto;max-width:1180px;padding:0 20px 40px}
h1{font-size:1.6em;margin:.8em 0 .2em}h2{font-size:1.25em;margin-top:1.8em;border-bottom:1px solid #ddd;padding-bottom:.2em}
.meta{color:#555;margin:.2em 0}nav a{margin-right:1em}
table{border-collapse:collapse;margin:.6em 0;font-variant-numeric:tabular-nums}
th,td{border-bottom:1px solid #e4e4e4;padding:.25em .6em;text-align:right;vertical-align:top}
th:first-child,td:first-child,td.text,th.text{text-align:left}
thead th{background:#f4f4f6;position:sticky;top:0}tr.group th{background:#fafafa;text-align:left;font-weight:600}
td.winner{background:#e6f4ea;font-weight:600}td.winner::after{content:" \\2605";color:#137333}
.note{color:#555;font-size:.92em}.alarm{background:#fce8e6;border-left:4px solid #c5221f;padding:.5em .8em}
.ok{background:#e6f4ea;border-left:4px solid #137333;padding:.5em .8em}
figure{margin:1em 0}svg.plot{max-width:100%;height:auto}figcaption{color:#555;font-size:.92em}
td.time{white-space:nowrap}details{margin:.5em 0}summary{cursor:pointer;font-weight:600}
"""

_SECTIONS = (
    ("side-by-side", "Side by side"),
    ("tradeoff", "The watermark trade-off"),
    ("error", "Error over processing time"),
    ("arrival", "How late events arrive"),
    ("gaps", "Where the answer was wrong when declared final"),
    ("audit", "Finance audit"),
    ("method", "How it was measured"),
    ("definitions", "How to read the numbers"),
)


def _e(text: object) -> str:
    return escape(str(text), quote=True)


def _figure(svg: str | None, caption: str, empty: str) -> str:
    if svg is None:
        return f'<p class="note">{_e(empty)}</p>'
    return f"<figure>{svg}<figcaption>{_e(caption)}</figcaption></figure>"


def _comparison_table(comparison: Comparison) -> str:
    configurations = comparison.configurations
    head = "".join(f'<th scope="col" data-config="{_e(c.key)}">{_e(c.label)}</th>' for c in configurations)
    lines = [f'<table class="comparison"><thead><tr><th class="text">metric</th>{head}'
             '<th class="text">better</th><th class="text">best</th></tr></thead><tbody>']
    group = None
    for row in comparison.rows:
        if row.group != group:
            group = row.group
            lines.append(f'<tr class="group"><th colspan="{len(configurations) + 3}">{_e(group)}</th></tr>')
        cells = "".join(
            f'<td data-config="{_e(c.key)}"{_WINNER if i in row.winners else ""}>{_e(formats.value(v, row.unit))}</td>'
            for i, (c, v) in enumerate(zip(configurations, row.values))
        )
        present = [v for v in row.values if v is not None]
        if row.better is None:
            best = "not judged"
        elif row.winners:
            best = ", ".join(configurations[i].label for i in row.winners)
        else:
            best = "all equal" if len(present) > 1 else "one value"
        lines.append(f'<tr data-metric="{_e(row.metric)}"><th scope="row" class="text">{_e(row.metric)}</th>{cells}'
                     f'<td class="text">{_e(row.better or "")}</td><td class="text best">{_e(best)}</td></tr>')
    lines.append("</tbody></table>")
    return "\n".join(lines)


def _reconciliation_banner(report: Report) -> str:
    bad = [r.configuration.label for r in report.results if r.reconciliation and not r.reconciliation.explained]
    if bad:
        return f'<p class="alarm" id="unexplained">Unexplained differences in: {_e(", ".join(bad))}.</p>'
    return '<p class="ok" id="unexplained">Reconciliation: every difference between a stream and batch truth is ' \
           "explained (unexplained windows and money are zero in every configuration with a stream).</p>"


def _method(report: Report) -> str:
    """Which runs the figures come from, and the rules that place them on the clock."""
    parts = []
    if report.streams:
        rows = "".join(
            f'<tr><td class="text">W={_e(s.watermark_delay)} L={_e(s.allowed_lateness)}</td>'
            f"<td>{formats.count(s.segments_per_batch)}</td><td>{formats.count(s.micro_batches)}</td>"
            f"<td>{formats.count(s.windows)}</td></tr>"
            for s in report.streams
        )
        parts.append(
            '<p class="note">Each stream setting ran twice: live (a Structured Streaming query over the log, its cost '
            "is the streaming job's or the speed layer's) and as a full replay (its cost is Kappa's replay; the replay "
            "also wrote the window history every served answer is read from). Before measuring, the two were checked "
            "to hold the same windows, row for row.</p>"
            '<table class="streams"><thead><tr><th class="text">stream</th><th>segments per micro-batch</th>'
            f"<th>micro-batches</th><th>windows, equal in both</th></tr></thead><tbody>{rows}</tbody></table>"
        )
    landings = ", ".join(formats.utc(t) for t in report.nightly_landings) or "none"
    end = formats.utc(report.end)
    log_end = "" if report.log_end is None else f" The log's last line was processed at {formats.utc(report.log_end)}."
    parts.append(
        f'<p class="note" id="clock">Lambda\'s nightly batch recompute runs at each UTC midnight on the processing-time '
        "clock over the segments complete by then, and lands at that midnight: from then on Lambda serves its rows for "
        f"every window starting before it (landed: {_e(landings)}). Every figure \u201cat the end\u201d is at {end}, "
        f"when the last recompute has landed and every window has ended.{_e(log_end)} The error series is sampled every "
        f"{_e(report.error_step)} of processing time where it changed.</p>"
    )
    if any(r.configuration.is_baseline for r in report.results):
        parts.append('<p class="note">Processing-time windows: the batch\'s first copies of every event, each counted '
                     "at once in the window of its processing time, compared with the truth's window of the same "
                     "bounds. It is computed by this measurement, not run as a job: no cost is shown for it.</p>")
    parts.append(f'<p class="note">CPU seconds cover the {_e(report.cost_scope)}.</p>')
    return "\n".join(parts)


def _arrival_figures(report: Report) -> str:
    delay = report.arrival_delay
    quoted = [(label, delay.at(p)) for label, p in (("p50", "0.5"), ("p99", "0.99"), ("p99.9", "0.999"), ("max", "1"))]
    facts = ", ".join(f"{label} {formats.seconds(v)}" for label, v in quoted if v is not None)
    skew = f" Events that arrived no later than their event time (not drawn): {formats.count(delay.non_positive)}." \
        if delay.non_positive else ""
    return f'<p class="note" id="arrival-quantiles">{formats.count(delay.events)} events; {_e(facts)}.{_e(skew)}</p>'


def _audit_section(report: Report, audit: FinanceAudit, limit: int) -> str:
    parts = [f'<p class="note">Every late billing event is in <a href="late_events_audit.csv">late_events_audit.csv</a> '
             f'({formats.count(len(audit.events))} rows), totals per account in '
             f'<a href="late_events_by_account.csv">late_events_by_account.csv</a>. '
             "Net amounts are signed (refunds negative). Below the totals per currency, each configuration "
             f"opens to its totals per account and, per currency, its {limit} largest events by amount.</p>"]
    labels = {c.key: c.label for c in report.configurations}
    currency_rows = "".join(
        f'<tr><td class="text">{_e(labels[t.configuration])}</td><td class="text">{_e(t.currency)}</td>'
        f"<td>{formats.count(t.events)}</td><td>{formats.money(t.amount, t.currency)}</td>"
        f"<td>{formats.money(t.absorbed, t.currency)}</td><td>{formats.money(t.side_output, t.currency)}</td>"
        f"<td>{formats.money(t.folded_in, t.currency)}</td></tr>"
        for t in sorted(audit.currency_totals(), key=lambda t: list(labels).index(t.configuration))
    )
    if currency_rows:
        parts.append('<table class="currency-totals"><thead><tr><th class="text">configuration</th>'
                     '<th class="text">currency</th><th>late events</th><th>net amount</th><th>absorbed</th>'
                     f"<th>side output</th><th>folded in</th></tr></thead><tbody>{currency_rows}</tbody></table>")
    for configuration in report.configurations:
        events = audit.of(configuration.key)
        if not events:
            continue
        totals = audit.account_totals(configuration.key)
        rows = "".join(
            f'<tr><td class="text">{_e(t.account_id)}</td><td class="text">{_e(t.currency)}</td>'
            f"<td>{formats.count(t.events)}</td><td>{formats.money(t.amount, t.currency)}</td>"
            f"<td>{formats.money(t.absorbed, t.currency)}</td><td>{formats.money(t.side_output, t.currency)}</td>"
            f"<td>{formats.money(t.folded_in, t.currency)}</td></tr>"
            for t in totals
        )
        shown = audit.largest(configuration.key, limit)
        event_rows = "".join(
            f'<tr><td class="text">{_e(e.event_id)}</td><td class="text">{_e(e.account_id)}</td>'
            f"<td>{formats.money(e.amount, e.currency)}</td><td class=\"text\">{_e(e.currency)}</td>"
            f'<td class="text time">{formats.utc(e.event_time)}</td><td class="text time">{formats.utc(e.ingest_time)}</td>'
            f"<td>{formats.seconds(e.lateness_seconds)}</td>"
            f'<td class="text time">{formats.utc(e.window_start)} –<br>{formats.utc(e.window_end)}</td>'
            f'<td class="text">{_e(e.disposition)}</td></tr>'
            for e in shown
        )
        parts.append(
            f'<details class="audit" data-config="{_e(configuration.key)}"><summary>{_e(configuration.label)}: '
            f"{formats.count(len(events))} late events, {formats.count(len(totals))} account totals</summary>"
            '<table class="account-totals"><thead><tr><th class="text">account</th><th class="text">currency</th>'
            "<th>events</th><th>net amount</th><th>absorbed</th><th>side output</th><th>folded in</th></tr></thead>"
            f"<tbody>{rows}</tbody></table>"
            f'<p class="note">{formats.count(len(shown))} of {formats.count(len(events))} events: the largest by '
            f"amount, at most {limit} per currency.</p>"
            '<table class="late-events"><thead><tr><th class="text">event</th><th class="text">account</th>'
            '<th>amount</th><th class="text">currency</th><th class="text">event time</th><th class="text">ingest time</th>'
            '<th>lateness</th><th class="text">window</th><th class="text">disposition</th></tr></thead>'
            f"<tbody>{event_rows}</tbody></table></details>"
        )
    if len(parts) == 1:
        parts.append('<p class="note">No late billing events.</p>')
    return "\n".join(parts)


_DEFINITIONS = (
    ("Processing time", "the log's clock: each line's ingest time, never earlier than the line before it. A day of "
                        "traffic replays in minutes, so latency is measured on this clock, from the window's end, "
                        "at the resolution of a line."),
    ("Time to first result", "until the served answer first holds the window (partial; 0 when before its end)."),
    ("Time until final", "until the window is declared complete: a stream's watermark reaches its end (the figure "
                         "the watermark delay controls; Lambda: its speed layer's watermark); processing-time "
                         "windows close when the clock passes their end."),
    ("Time until exactly right", "until the served value equals the truth and keeps it to the end; a window never "
                                 "exactly right is wrong at the end. Lambda counts its batch correction from the "
                                 "moment it lands."),
    ("Completeness when final", "events counted in each window's answer when declared final (none for windows never "
                                "final), over events in truth."),
    ("Windows wrong", "windows that have ended whose served total differs from batch truth (or is missing)."),
    ("Money wrong", "the sum of |served − truth| over those windows, per currency; currencies are never added together."),
    ("Late money", "gross: the sum of |amount| of late events, per currency. Side output: dropped by the stream; "
                   "absorbed: applied within the allowed lateness; folded in: restored by the batch recompute."),
    ("Costs", "Lambda: everything it runs — speed layer, nightly batch recomputes, reconciliation. Kappa: its "
              "streaming job and a separately measured full replay. A stream with allowed lateness 0 is one run, "
              "shown for both."),
    ("Best (\u2605)", "the best value of a row; every tied configuration is marked; no mark when all are equal, "
                      "when fewer than two configurations have a value, or for rows that are not judged."),
)


def _error_caption(report: Report) -> str:
    text = (f"Sampled every {report.error_step} of processing time: windows wrong and money wrong per currency, "
            "log scale above 1 (Lambda solid, Kappa dashed, processing-time windows dotted; a Lambda line lies on "
            "Kappa's at L=0 until its batch lands).")
    later = [t for t in report.nightly_landings if report.log_end is not None and t > report.log_end]
    if later:
        lambdas = [r for r in report.results if r.configuration.architecture == "lambda" and r.error_series]
        wrong = "; ".join(f"{r.configuration.label}: {formats.count(r.error_series[-1].windows_wrong)}" for r in lambdas)
        text += (f" The axis ends after the log's last line; Lambda's nightly recompute lands later, at "
                 f"{', '.join(formats.utc(t) for t in later)}; windows wrong at the end ({formats.utc(report.end)}): {wrong}.")
    return text


def render_html(report: Report, audit_rows_shown: int = AUDIT_ROWS_SHOWN) -> str:
    """The report page as a string (UTF-8 when written)."""
    comparison = compare(report)
    heat_maps = "".join(
        _figure(plots.gap_heat_map(h, f"plot-gaps-{n}"),
                f"{report.result(h.configuration_key).configuration.label}, {h.currency}: |served − truth| when the "
                f"window was declared final, for the accounts with the largest gaps (windows with a gap: "
                f"{formats.count(len(h.cells))}).",
                f"{h.currency}: no window had a gap.")
        for n, h in enumerate(report.heat_maps)
    ) or '<p class="note">No gaps recorded.</p>'
    sections = {
        "side-by-side": _reconciliation_banner(report) + _comparison_table(comparison)
        + f'<p class="note">Figures at the end are at {formats.utc(report.end)}; how each is measured: '
        '<a href="#method">How it was measured</a>. CPU seconds cover the ' + _e(report.cost_scope) + ".</p>",
        "tradeoff": _figure(plots.watermark_tradeoff(report),
                            "Per watermark delay: the share of the truth's events in the windows' answers when declared "
                            "final, and the median time from a window's end until then; one line per architecture and "
                            "allowed lateness (Lambda's speed layer is the stream with L=0: their lines coincide).",
                            "No watermark figures."),
        "error": _figure(plots.error_over_time(report), _error_caption(report), "No error series."),
        "arrival": _arrival_figures(report) + _figure(plots.arrival_delay_cdf(report),
                                                      "Cumulative share of events by arrival delay; grey lines at 1 minute and 1 hour.",
                                                      "No arrival delays."),
        "gaps": heat_maps,
        "audit": _audit_section(report, report.audit, audit_rows_shown),
        "method": _method(report),
        "definitions": "<dl>" + "".join(f"<dt>{_e(t)}</dt><dd>{_e(d)}</dd>" for t, d in _DEFINITIONS) + "</dl>",
    }
    body = "\n".join(f'<section id="{sid}"><h2>{_e(title)}</h2>\n{sections[sid]}\n</section>' for sid, title in _SECTIONS)
    nav = " ".join(f'<a href="#{sid}">{_e(title)}</a>' for sid, title in _SECTIONS)
    meta = (f"Run {_e(report.run_id)} · source {_e(report.source)} · {_e(report.window)} windows · "
            f"{formats.count(report.events)} events · generated {formats.utc(report.generated_at)}")
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; img-src data:">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Lambda vs Kappa — {_e(report.run_id)}</title>
<style>{_CSS}</style></head>
<body>
<header><h1>Lambda vs Kappa on one log</h1><p class="meta" id="meta">{meta}</p><nav>{nav}</nav></header>
{body}
<footer class="note"><p>Every figure on this page is in <a href="summary.json">summary.json</a>.</p></footer>
</body></html>
"""

"""The report's figures, drawn with matplotlib and returned as inline SVG text.

Each function takes report objects and returns one ``<svg id="plot-...">`` element ready to
place in an HTML page (no XML prolog, every internal id prefixed with the plot's id so several
figures can share a page), or ``None`` when there is nothing to draw. Money becomes ``float``
here for drawing only; the figures quoted on the page come from the exact values.
"""

from __future__ import annotations

import datetime as dt
import io
import re
from collections.abc import Sequence
from decimal import Decimal

from matplotlib import colormaps, rc_context
from matplotlib.cm import ScalarMappable
from matplotlib.colors import LogNorm
from matplotlib.dates import AutoDateLocator, ConciseDateFormatter, date2num
from matplotlib.figure import Figure

from shared.durations import format_duration

from .decision import Decision
from .formats import ratio as formats_ratio
from .gaps import GapHeatMap
from .model import Configuration, Report

__all__ = [
    "PLOT_IDS",
    "decision_curve",
    "arrival_delay_cdf",
    "watermark_tradeoff",
    "error_over_time",
    "gap_heat_map",
]

PLOT_IDS = ("plot-decision", "plot-tradeoff", "plot-error", "plot-arrival-delay")
"""Ids of the figures every report has (given data); heat maps add ``plot-gaps-<n>``."""

MAX_CURRENCY_PANELS = 6
RASTERIZE_ABOVE_POINTS = 20_000
_DELAY_TICKS = (0.001, 0.01, 0.1, 1, 10, 60, 600, 3600, 6 * 3600, 86400, 7 * 86400)
_PALETTE = (
    "#1f77b4",
    "#d62728",
    "#2ca02c",
    "#9467bd",
    "#ff7f0e",
    "#17becf",
    "#8c564b",
    "#e377c2",
    "#7f7f7f",
    "#bcbd22",
)


_LINES = {"lambda": "-", "kappa": "--", "processing-time": ":"}


def _style(configuration: Configuration, index: int) -> dict:
    """Lambda solid, Kappa dashed, processing-time windows dotted; one colour per configuration."""
    return {
        "color": _PALETTE[index % len(_PALETTE)],
        "linestyle": _LINES[configuration.architecture],
        "label": configuration.label,
    }


def _literal(text: str) -> str:
    """``text`` drawn as written: matplotlib would read a pair of ``$`` as mathematics (and fail
    on an id such as ``acct$\\frac$``), so each ``$`` is escaped."""
    return str(text).replace("$", r"\$")


def _svg(figure: Figure, plot_id: str) -> str:
    """Serialise ``figure`` as an inline ``<svg>`` whose ids all start with ``plot_id``."""
    buffer = io.StringIO()
    with rc_context({"svg.fonttype": "none", "svg.hashsalt": plot_id}):
        figure.savefig(buffer, format="svg", metadata={"Date": None, "Creator": None}, bbox_inches="tight", dpi=144)
    text = buffer.getvalue()
    text = text[text.index("<svg") :]
    text = re.sub(r"<metadata>.*?</metadata>\s*", "", text, flags=re.S)
    text = re.sub(r'\bid="([^"]+)"', lambda m: f'id="{plot_id}-{m.group(1)}"', text)
    text = re.sub(r"url\(#([^)]+)\)", lambda m: f"url(#{plot_id}-{m.group(1)})", text)
    text = re.sub(r'href="#([^"]+)"', lambda m: f'href="#{plot_id}-{m.group(1)}"', text)
    return text.replace("<svg", f'<svg id="{plot_id}" role="img" class="plot"', 1)


_MARKERS = {"lambda": "o", "kappa": "s"}


def decision_curve(decision: Decision, plot_id: str = "plot-decision") -> str | None:
    """The decision's criterion (%) against the watermark delay: each swept configuration a point
    (Lambda circles, Kappa squares), the recommended one ringed, the target a dashed line, and
    the advisor's curve as a line where the report has one (symlog x: a delay of 0 is drawn)."""
    points = [c for c in decision.candidates if c.criterion is not None]
    if not points:
        return None
    figure = Figure(figsize=(6.2, 3.6), layout="constrained")
    axes = figure.subplots()
    curve = decision.curve
    if curve is not None and curve.points:
        drawn = [(float(p.delay_seconds), float(p.completeness_when_final) * 100) for p in curve.points
                 if p.completeness_when_final is not None]  # fmt: skip
        axes.plot([d for d, _ in drawn], [v for _, v in drawn], color="#7f7f7f", linewidth=1.2,
                  label=f"advisor's curve, L={curve.allowed_lateness}")  # fmt: skip
        if decision.advised is not None:
            x, y = float(decision.advised.delay_seconds), float(decision.advised.completeness_when_final) * 100
            axes.scatter([x], [y], marker="*", s=160, color="#137333", zorder=5,
                         label=f"advisor: {decision.advised.watermark_delay} reaches the target")  # fmt: skip
    drawn_at: dict[tuple[float, float], int] = {}
    for index, candidate in enumerate(points):
        x, y = float(candidate.delay_seconds), float(candidate.criterion) * 100
        # Configurations that land on one point (Lambda at W and Kappa at (W, 0) always do) are
        # drawn as hollow markers growing around each other, so each stays visible.
        under = drawn_at[(x, y)] = drawn_at.get((x, y), -1) + 1
        axes.scatter([x], [y], marker=_MARKERS.get(candidate.architecture, "o"), s=40 + 70 * under, zorder=3,
                     facecolors="none" if under else _PALETTE[index % len(_PALETTE)], linewidths=1.6,
                     edgecolors=_PALETTE[index % len(_PALETTE)], label=_literal(candidate.label))  # fmt: skip
        if candidate.key == decision.recommended:
            axes.scatter([x], [y], s=420, facecolors="none", edgecolors="#137333", linewidths=2, zorder=4)
            axes.annotate("recommended", (x, y), xytext=(0, 13), textcoords="offset points", color="#137333",
                          fontsize="small", fontweight="bold", horizontalalignment="center")  # fmt: skip
    axes.axhline(float(decision.target) * 100, color="#c5221f", linestyle="--", linewidth=0.9,
                 label=f"target {formats_ratio(decision.target)}")  # fmt: skip
    delays = sorted({float(c.delay_seconds) for c in points})
    axes.set_xscale("symlog", linthresh=1)
    axes.margins(x=0.12, y=0.18)
    axes.set_xticks(delays, labels=[format_duration(int(d * 1_000_000)) if d else "0" for d in delays])
    axes.minorticks_off()
    axes.set_xlabel("watermark delay")
    axes.set_ylabel(f"{decision.criterion} (%)")
    axes.grid(True, alpha=0.3)
    figure.legend(loc="outside lower center", ncols=3, fontsize="x-small", frameon=False)
    return _svg(figure, plot_id)


def arrival_delay_cdf(report: Report, plot_id: str = "plot-arrival-delay") -> str | None:
    """Share of events arrived within a delay (``ingest_time - event_time``), log-scale delay."""
    points = [(float(q.seconds), float(q.probability)) for q in report.arrival_delay.quantiles if q.seconds > 0]
    if not points:
        return None
    figure = Figure(figsize=(7, 3.6))
    axes = figure.subplots()
    axes.step([p[0] for p in points], [p[1] for p in points], where="post", color=_PALETTE[0])
    axes.set_xscale("log")
    low, high = points[0][0], points[-1][0]
    ticks = [t for t in _DELAY_TICKS if low / 10 <= t <= high * 10]
    axes.set_xticks(ticks, labels=[format_duration(int(t * 1_000_000)) for t in ticks])
    axes.set_ylim(0, 1.02)
    axes.set_xlabel("arrival delay, ingest time − event time (log scale)")
    axes.set_ylabel("share of events arrived")
    for marker in (60, 3600):
        axes.axvline(marker, color="#bbbbbb", linewidth=0.8, zorder=0)
    axes.grid(True, which="major", alpha=0.3)
    return _svg(figure, plot_id)


def watermark_tradeoff(report: Report, plot_id: str = "plot-tradeoff") -> str | None:
    """The watermark delay's trade-off: completeness when final (left) and the median time until
    final (right) against the watermark delay; one line per architecture and allowed lateness
    (symlog x so a delay of 0 can be drawn). The processing-time baseline has no watermark."""
    lines: dict[tuple[str, str], list[tuple[float, float | None, float | None, int]]] = {}
    for index, result in enumerate(report.results):
        configuration, latency = result.configuration, result.latency
        if configuration.is_baseline:
            continue
        share = None
        if latency.events_when_final is not None and latency.truth_events:
            share = float(Decimal(latency.events_when_final) / Decimal(latency.truth_events)) * 100
        final = None if latency.final_p50 is None else float(latency.final_p50)
        if share is None and final is None:
            continue
        key = (configuration.architecture, configuration.allowed_lateness)
        lines.setdefault(key, []).append((float(configuration.watermark_delay_seconds), share, final, index))
    if not lines:
        return None
    figure = Figure(figsize=(9, 3.6), layout="constrained")
    left, right = figure.subplots(1, 2)
    for (architecture, lateness), points in lines.items():
        points.sort()
        first = report.results[points[0][3]].configuration
        style = _style(first, points[0][3]) | {"label": f"{architecture.capitalize()} L={lateness}"}
        for axes, column in ((left, 1), (right, 2)):
            drawn = [(p[0], p[column]) for p in points if p[column] is not None]
            axes.plot([p[0] for p in drawn], [p[1] for p in drawn], marker="o", **style)
    delays = {
        float(r.configuration.watermark_delay_seconds): r.configuration.watermark_delay
        for r in report.results
        if not r.configuration.is_baseline
    }
    for axes in (left, right):
        axes.set_xscale("symlog", linthresh=1)
        axes.set_xticks(sorted(delays), labels=[delays[d] for d in sorted(delays)])
        axes.minorticks_off()
        axes.set_xlabel("watermark delay")
        axes.grid(True, alpha=0.3)
    left.set_ylabel("events in the answer when final (%)")
    right.set_ylabel("time until final, median (s)")
    left.legend(fontsize="small")
    return _svg(figure, plot_id)


def error_over_time(report: Report, plot_id: str = "plot-error") -> str | None:
    """Windows wrong and money wrong (one panel per currency) over processing time, on a
    symmetric log scale (linear below 1).

    The time axis ends a little after the log's last line (``report.log_end``): every series
    holds its last value from there to the end of the measurement, but for Lambda's nightly
    recomputes landing later, which the caption states with the figures at the end.
    """
    if not any(r.error_series for r in report.results):
        return None
    currencies = sorted({c for r in report.results for p in r.error_series for c in p.money_wrong})
    panels = 1 + min(len(currencies), MAX_CURRENCY_PANELS)
    # Thousands of steps per line make a vector drawing megabytes long: draw them as pixels then.
    rasterized = panels * sum(len(r.error_series) for r in report.results) > RASTERIZE_ABOVE_POINTS
    figure = Figure(figsize=(8, 0.6 + 2.2 * panels), layout="constrained")
    axes = figure.subplots(panels, 1, sharex=True, squeeze=False)[:, 0]
    for index, result in enumerate(report.results):
        series = result.error_series
        if not series:
            continue
        times = [p.processing_time for p in series]
        style = _style(result.configuration, index) | {"rasterized": rasterized}
        axes[0].step(times, [p.windows_wrong for p in series], where="post", **style)
        for panel, currency in zip(axes[1:], currencies):
            panel.step(times, [float(p.money_wrong.get(currency, 0)) for p in series], where="post", **style)
    first = min(r.error_series[0].processing_time for r in report.results if r.error_series)
    if report.log_end is not None and report.log_end < report.end:
        axes[0].set_xlim(first, report.log_end + (report.log_end - first) / 20)
    axes[0].set_ylabel("windows wrong")
    figure.legend(*axes[0].get_legend_handles_labels(), loc="outside upper center", ncols=2, fontsize="small")
    for panel, currency in zip(axes[1:], currencies):
        panel.set_ylabel(f"money wrong ({currency})")
    for panel in axes:
        # Processing-time windows are wrong by an order of magnitude more: a linear axis would flatten the rest.
        panel.set_yscale("symlog", linthresh=1)
        panel.set_ylim(bottom=0)
        panel.grid(True, alpha=0.3)
    axes[-1].set_xlabel("processing time (UTC)")
    if len(currencies) > MAX_CURRENCY_PANELS:
        figure.text(
            0.01, 0, f"{len(currencies) - MAX_CURRENCY_PANELS} more currencies in summary.json", fontsize="small"
        )
    for label in axes[-1].get_xticklabels():
        label.set(rotation=30, horizontalalignment="right")
    return _svg(figure, plot_id)


def gap_heat_map(
    heat_maps: GapHeatMap | Sequence[GapHeatMap], plot_id: str, accounts: int = 10, windows: int = 30
) -> str | None:
    """One configuration's gaps when final: a panel per currency, the ``accounts`` with the
    largest gaps as rows and, among their windows, the ``windows`` with the largest gaps drawn
    where they are in time (each cell spans its window's start to end on a time axis shared by
    the panels; blank: no gap, or not among the largest); log colour scale per currency."""
    maps = [heat_maps] if isinstance(heat_maps, GapHeatMap) else list(heat_maps)
    panels = [(m, *m.grid(accounts, windows)) for m in maps]
    panels = [p for p in panels if p[1]][:MAX_CURRENCY_PANELS]
    if not panels:
        return None
    heights = [0.9 + 0.28 * len(rows) for _, rows, _, _ in panels]
    figure = Figure(figsize=(9, 0.6 + sum(heights)), layout="constrained")
    axes = figure.subplots(len(panels), 1, sharex=True, squeeze=False, height_ratios=heights)[:, 0]
    for panel, (heat_map, rows, columns, values) in zip(axes, panels):
        positive = [float(v) for row in values for v in row if v > 0]
        norm = LogNorm(vmin=min(positive), vmax=max(positive)) if max(positive) > min(positive) else None
        image = ScalarMappable(norm=norm, cmap=colormaps["Reds"])
        if norm is None:
            image.set_clim(0, max(positive) * 2)
        for y, row in enumerate(values):
            cells = [(date2num(w[0]), date2num(w[1]) - date2num(w[0]), float(v)) for w, v in zip(columns, row) if v > 0]
            panel.broken_barh([(x, width) for x, width, _ in cells], (y - 0.42, 0.84),
                              facecolors=[image.to_rgba(v) for _, _, v in cells])  # fmt: skip
        panel.set_yticks(range(len(rows)), labels=[_literal(row) for row in rows], fontsize="small")
        panel.set_ylim(len(rows) - 0.5, -0.5)
        panel.grid(True, axis="x", alpha=0.3)
        figure.colorbar(image, ax=panel, label=f"gap ({heat_map.currency})", pad=0.01)
    first = min(w[0] for _, _, columns, _ in panels for w in columns)
    last = max(w[1] for _, _, columns, _ in panels for w in columns)
    margin = max((last - first) / 40, dt.timedelta(seconds=1))
    axes[-1].set_xlim(date2num(first - margin), date2num(last + margin))
    locator = AutoDateLocator()
    axes[-1].xaxis.set_major_locator(locator)
    axes[-1].xaxis.set_major_formatter(ConciseDateFormatter(locator))
    axes[-1].set_xlabel("window (UTC), drawn from its start to its end")
    return _svg(figure, plot_id)

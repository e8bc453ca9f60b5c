"""The watermark advisor's ``Advice`` as text, JSON and a plot: renderers that only read it.

JSON conventions (those of the comparison's ``summary.json``): exact numbers are strings (money
and measures with every decimal they have, at least six; seconds with six; ratios as fractions
with six, ``1.000000`` = 100%); money is per currency (or measure), a name absent meaning zero;
delays are microseconds (``watermark_delay_us``) and as written (``watermark_delay``).
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from pathlib import Path
from typing import Any

from lklab.report import formats
from lklab.watermark_advisor import Advice, Point
from shared.durations import format_duration

__all__ = ["FORMAT", "to_json", "to_text", "write_plot", "watermark_curve"]

FORMAT = "lklab-watermark-advice/1"
_SIX = Decimal("0.000001")


def _exact(number: Decimal | None) -> str | None:
    """Every decimal ``number`` has, at least six (no rounding, whatever its digits)."""
    if number is None:
        return None
    whole, _, decimals = format(number, "f").partition(".")
    return f"{whole}.{decimals.ljust(6, '0')}"


def _ratio(number: Decimal | None) -> str | None:
    return None if number is None else format(number.quantize(_SIX), "f")


def _percent(number: Decimal | None) -> str:
    return "—" if number is None else formats.ratio(number)


def _seconds(number: Decimal | None) -> str:
    return "—" if number is None else formats.seconds(number.quantize(Decimal("0.1")))


def _money(money: Mapping[str, Decimal]) -> dict[str, str]:
    return {name: _exact(amount) for name, amount in sorted(money.items())}


def _point(point: Point) -> dict[str, Any]:
    labels = sorted(point.final_window_money)
    return {
        "watermark_delay": format_duration(point.watermark_delay),
        "watermark_delay_us": point.watermark_delay,
        "late_events": point.late_events,
        "late_money": _money(point.late_money),
        "completeness": _ratio(point.completeness),
        "completeness_when_final": _ratio(point.completeness_when_final),
        "money_completeness": {name: _ratio(point.money_completeness(name)) for name in labels},
        "events_when_final": point.events_when_final,
        "final_window_events": point.final_window_events,
        "truth_events": point.truth_events,
        "windows": point.windows,
        "never_final": point.never_final,
        "time_until_final": {
            "p50": _exact(point.final_p50),
            "p95": _exact(point.final_p95),
            "max": _exact(point.final_max),
        },
        "exact": point.exact,
    }


def to_json(advice: Advice, source: str) -> dict[str, Any]:
    """The advice as a JSON document: ``points`` by the delays as given, ``curve``, ``recommended``."""
    rec = advice.recommended
    return {
        "format": FORMAT,
        "source": source,
        "allowed_lateness": format_duration(advice.allowed_lateness),
        "dedup_horizon": format_duration(advice.dedup_horizon),
        "money_by": advice.unit,
        "exact_from": format_duration(advice.exact_from),
        "points": {name: _point(point) for name, point in advice.points.items()},
        "curve": [_point(point) for point in advice.curve],
        "recommended": None
        if rec is None
        else {
            **_point(rec.point),
            "target_completeness": _ratio(rec.target),
            "latency_budget": None if rec.budget is None else format_duration(rec.budget),
            "met": rec.met,
            "why": rec.why,
        },
    }


def _money_text(money: Mapping[str, Decimal]) -> str:
    return ", ".join(f"{name} {formats.money(amount, name)}" for name, amount in sorted(money.items())) or "—"


def _row(point: Point, name: str = "") -> str:
    delay = name or format_duration(point.watermark_delay)
    mark = "" if point.exact else "  (not exact: resends past the dedup horizon)"
    return (
        f"  {delay:>8}  {point.late_events:>10,}  {_percent(point.completeness):>9}  "
        f"{_seconds(point.final_p50):>9}  {_seconds(point.final_p95):>9}  {point.never_final:>11,}  "
        f"{_money_text(point.late_money)}{mark}"
    )


def to_text(advice: Advice) -> str:
    """The curve, the delays asked for and the recommendation, as a table and a sentence."""
    header = (
        f"  {'delay':>8}  {'late pairs':>10}  {'of final':>9}  {'final p50':>9}  {'final p95':>9}  "
        f"{'never final':>11}  late {advice.unit} (net)"
    )
    lines = [
        f"watermark delay trade-off: allowed lateness {format_duration(advice.allowed_lateness)}, "
        f"{len(advice.curve)} delays, each what a replay with it writes"
        + ("" if not advice.exact_from else f" (exact from {format_duration(advice.exact_from)})"),
        header,
        *(_row(point) for point in advice.curve),
    ]
    if advice.points:
        lines += ["asked for:", header, *(_row(point, name) for name, point in advice.points.items())]
    rec = advice.recommended
    if rec is not None:
        asked = [f"completeness {_percent(rec.target)}"] if rec.target is not None else []
        asked += [f"p95 time until final within {format_duration(rec.budget)}"] if rec.budget is not None else []
        point = rec.point
        lines.append(
            f"recommended: watermark delay {format_duration(point.watermark_delay)} for {' and '.join(asked)} "
            f"({rec.why}{'' if rec.met else ': not met'}): completeness of the windows final "
            f"{_percent(point.completeness)} ({_percent(point.completeness_when_final)} of every event), "
            f"time until final median {_seconds(point.final_p50)}, p95 {_seconds(point.final_p95)}; "
            f"{point.late_events:,} late pairs"
        )
    return "\n".join(lines)


def write_plot(advice: Advice, path: Path) -> Path:
    """The curve as a PNG at ``path``: late pairs, and completeness with the time until final, by delay."""
    from matplotlib.figure import Figure

    delays = [p.watermark_delay / 1e6 for p in advice.curve]
    figure = Figure(figsize=(9, 6), layout="constrained")
    late, final = figure.subplots(2, 1, sharex=True)
    late.step(delays, [p.late_events for p in advice.curve], where="post", color="#d62728")
    late.set_ylabel("late (event, window) pairs")
    late.set_title(f"watermark delay trade-off, allowed lateness {format_duration(advice.allowed_lateness)}")
    share = [float(p.completeness) * 100 if p.completeness is not None else None for p in advice.curve]
    final.plot(delays, share, color="#1f77b4", label="completeness of the windows final (%)")
    final.set_ylabel("completeness of the windows final (%)")
    final.set_xlabel("watermark delay (s)")
    waits = final.twinx()
    for quantile, style in (("final_p50", ":"), ("final_p95", "--")):
        values = [float(getattr(p, quantile)) if getattr(p, quantile) is not None else None for p in advice.curve]
        waits.plot(delays, values, color="#2ca02c", linestyle=style, label=f"time until final {quantile[6:]} (s)")
    waits.set_ylabel("time until final (s)")
    for name, point in advice.points.items():
        for axis in (late, final):
            axis.axvline(point.watermark_delay / 1e6, color="#7f7f7f", linewidth=0.8)
        late.annotate(name, (point.watermark_delay / 1e6, 0), textcoords="offset points", xytext=(2, 2))
    if advice.recommended is not None:
        for axis in (late, final):
            axis.axvline(advice.recommended.point.watermark_delay / 1e6, color="#ff7f0e", linewidth=1.5)
    handles = final.get_legend_handles_labels()[0] + waits.get_legend_handles_labels()[0]
    final.legend(handles, [h.get_label() for h in handles], loc="lower right", fontsize="small")
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, format="png", dpi=100)
    return path


def watermark_curve(advice: Advice, source: str):
    """The curve as the comparison report holds it (``lklab.report.curve.WatermarkCurve``): each
    delay's late pairs, their net money per currency (a declared pipeline's measures are not
    money: left out), the report's completeness when final and the time until final."""
    from lklab.report.curve import CurvePoint, WatermarkCurve

    money = advice.unit == "currency"
    points = [
        CurvePoint(
            format_duration(point.watermark_delay),
            point.late_events,
            dict(point.late_money) if money else {},
            point.completeness_when_final,
            point.final_p50,
            point.final_p95,
        )
        for point in advice.curve
    ]
    return WatermarkCurve(tuple(points), format_duration(advice.allowed_lateness), source)

"""The watermark-delay curve: what each delay would give, for the report's first screen.

The comparison sweeps a few configurations; an advisor can compute the whole curve exactly, one
point per candidate delay. The report keeps a slot for it (``Report.watermark_curve``,
``PipelineReport.watermark_curve``): when it is filled, the first screen draws it under the
swept configurations; until then the swept configurations alone are drawn.

Units: delays as written (``"30s"``); money exact per currency (``{currency: Decimal}``, absent
means zero, never added across currencies); ratios as fractions; seconds exact ``Decimal`` of
processing time after a window's end.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal

from shared.durations import parse_duration

from .validation import check_per_currency, freeze

__all__ = ["CurvePoint", "WatermarkCurve"]


@dataclass(frozen=True)
class CurvePoint:
    """One watermark delay: the (event, window) pairs it leaves late (behind the watermark when
    their window was final) and their money per currency (net: signed amounts summed), the completeness when final (events in the
    answers when declared final over events in truth), and the time from a window's end until
    it is final, median and p95 (``None``: no window got there)."""

    watermark_delay: str
    late_events: int
    late_money: Mapping[str, Decimal] = field(default_factory=dict)
    completeness_when_final: Decimal | None = None
    final_p50: Decimal | None = None
    final_p95: Decimal | None = None

    def __post_init__(self) -> None:
        parse_duration(self.watermark_delay, name="watermark_delay")
        if self.late_events < 0:
            raise ValueError(f"late_events {self.late_events}: must not be negative")
        freeze(self, "late_money", check_per_currency(self.late_money, "late_money"))

    @property
    def delay_seconds(self) -> Decimal:
        return Decimal(parse_duration(self.watermark_delay)) / 1_000_000


@dataclass(frozen=True)
class WatermarkCurve:
    """The curve at one allowed lateness, points in increasing delay; ``source`` says what
    computed it (a command line, a method)."""

    points: tuple[CurvePoint, ...]
    allowed_lateness: str = "0"
    source: str = ""

    def __post_init__(self) -> None:
        freeze(self, "points", tuple(self.points))
        delays = [p.delay_seconds for p in self.points]
        if delays != sorted(delays) or len(set(delays)) != len(delays):
            raise ValueError("a watermark curve's points must be in increasing delay, each delay once")

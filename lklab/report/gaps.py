"""Where the answer was wrong when declared final: per-window money gaps, for a windows x accounts map.

A gap is ``|served total - truth total|`` of one window key at the moment the window was declared
final (a stream's watermark reached its end; a processing-time window's end passed): how wrong
the answer was that a consumer waiting for completeness got. Gaps are per currency, so a map
holds one currency only.

The full record of a window that differs from the truth (both sides, the signed delta, what
explains it) is ``reconciliation.result.WindowGap``; a map needs only how far off the answer was
when it was declared final, that record's ``|amount_delta|`` at that moment: a ``FinalGap``.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from decimal import Decimal

from .validation import check_decimal, check_per_currency, check_utc, freeze

__all__ = ["FinalGap", "GapHeatMap"]

Window = tuple[dt.datetime, dt.datetime]


@dataclass(frozen=True)
class FinalGap:
    """One window ``[window_start, window_end)`` of one account whose answer when final was wrong
    by ``gap``: ``|served - truth|`` of its money, in the map's currency."""

    window_start: dt.datetime
    window_end: dt.datetime
    account_id: str
    gap: Decimal

    def __post_init__(self) -> None:
        check_utc(self.window_start, "window_start")
        check_utc(self.window_end, "window_end")
        if check_decimal(self.gap, "gap") < 0:
            raise ValueError(f"gap {self.gap} is negative; a gap is an absolute difference")


@dataclass(frozen=True)
class GapHeatMap:
    """The gaps of one configuration (``configuration_key``) in one currency; zero gaps omitted."""

    configuration_key: str
    currency: str
    cells: tuple[FinalGap, ...]

    def __post_init__(self) -> None:
        freeze(self, "cells", tuple(self.cells))
        check_per_currency({self.currency: Decimal(0)}, "currency")
        keys = [(c.window_start, c.window_end, c.account_id) for c in self.cells]
        if len(keys) != len(set(keys)):
            raise ValueError(f"{self.configuration_key} {self.currency}: a window of an account appears twice")

    def top(self, accounts: int, windows: int) -> tuple[tuple[str, ...], tuple[Window, ...]]:
        """The ``accounts`` with the largest total gap (largest first, ties by id), and among
        their windows the ``windows`` with the largest total gap, in time order."""
        by_account: dict[str, Decimal] = {}
        for cell in self.cells:
            by_account[cell.account_id] = by_account.get(cell.account_id, Decimal(0)) + cell.gap
        chosen = tuple(sorted(by_account, key=lambda a: (-by_account[a], a))[:accounts])
        by_window: dict[Window, Decimal] = {}
        for cell in self.cells:
            if cell.account_id in chosen:
                key = (cell.window_start, cell.window_end)
                by_window[key] = by_window.get(key, Decimal(0)) + cell.gap
        largest = sorted(by_window, key=lambda w: (-by_window[w], w))[:windows]
        return chosen, tuple(sorted(largest))

    def grid(self, accounts: int, windows: int) -> tuple[tuple[str, ...], tuple[Window, ...], list[list[Decimal]]]:
        """``top`` plus the gap of each (account, window): rows are accounts, columns windows."""
        chosen, columns = self.top(accounts, windows)
        lookup = {(c.account_id, c.window_start, c.window_end): c.gap for c in self.cells}
        values = [[lookup.get((a, *w), Decimal(0)) for w in columns] for a in chosen]
        return chosen, columns, values

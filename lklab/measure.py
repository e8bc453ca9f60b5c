"""Measurements of one streaming run, read from the tables it wrote (no Spark job re-runs).

Processing time is simulated: the ingest time the log had reached when a micro-batch ended
(the largest ``ingest_time`` of the segments it had read). After micro-batch ``b`` the stream
serves ``speed_aggregates`` as of ``b`` (Delta time travel: each commit is tagged with its
batch). Lambda serves the batch truth instead for every day that is over by then (its nightly
recompute), and the speed layer's figures otherwise. Windows count as *wrong* once they have
ended and the served total differs from the truth (or is missing).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from decimal import Decimal

import pyarrow as pa

from lklab.report import ErrorPoint, LatencySummary, LateBillingEvent, WindowGap
from shared.tables import Tables

__all__ = ["Served", "Snapshot", "served_series", "error_point", "latency", "first_result_gaps", "late_events_of", "truth_of"]

Key = tuple[dt.datetime, dt.datetime, str, str]
Value = tuple[int, Decimal]


def _utc(moment: dt.datetime) -> dt.datetime:
    return moment if moment.tzinfo else moment.replace(tzinfo=dt.timezone.utc)


def _rows(table: pa.Table) -> dict[Key, Value]:
    return {
        (_utc(r["window_start"]), _utc(r["window_end"]), r["account_id"], r["currency"]): (r["event_count"], r["amount_total"])
        for r in table.select(["window_start", "window_end", "account_id", "currency", "event_count", "amount_total"]).to_pylist()
    }


def truth_of(tables: Tables) -> dict[Key, Value]:
    return _rows(tables.read_arrow("batch_truth"))


@dataclass(frozen=True)
class Snapshot:
    """What was served after one micro-batch."""

    batch_id: int
    processing_time: dt.datetime
    windows: dict[Key, Value]


def served_series(
    tables: Tables, prefix: str, ingest_by_segment: dict[int, dt.datetime], truth: dict[Key, Value], lambda_days: bool
) -> list[Snapshot]:
    """The served answer after each micro-batch of the run under ``prefix``, in batch order."""
    metrics = sorted(tables.read_arrow(f"{prefix}stream_metrics").to_pylist(), key=lambda r: r["batch_id"])
    ordered = sorted(ingest_by_segment)
    series, reached = [], None
    for row in metrics:
        for segment in ordered:
            if segment <= row["last_segment"]:
                moment = ingest_by_segment[segment]
                reached = moment if reached is None or moment > reached else reached
        windows = _rows(tables.as_of(f"{prefix}speed_aggregates", row["batch_id"]))
        if lambda_days:
            windows = _lambda_view(windows, truth, reached)
        series.append(Snapshot(row["batch_id"], reached, windows))
    return series


def _lambda_view(speed: dict[Key, Value], truth: dict[Key, Value], now: dt.datetime) -> dict[Key, Value]:
    closed = lambda start: start.date() < now.date()
    view = {k: v for k, v in speed.items() if not closed(k[0])}
    view.update({k: v for k, v in truth.items() if closed(k[0])})
    return view


def error_point(snapshot: Snapshot, truth: dict[Key, Value]) -> ErrorPoint:
    """Windows ended by the snapshot's processing time whose served total is not the truth."""
    now = snapshot.processing_time
    wrong, money = 0, {}
    for key in {k for k in truth.keys() | snapshot.windows.keys() if k[1] <= now}:
        served, right = snapshot.windows.get(key), truth.get(key)
        if served != right:
            wrong += 1
            gap = abs((right[1] if right else Decimal(0)) - (served[1] if served else Decimal(0)))
            money[key[3]] = money.get(key[3], Decimal(0)) + gap
    return ErrorPoint(processing_time=now, windows_wrong=wrong, money_wrong=money)


def latency(series: list[Snapshot], truth: dict[Key, Value]) -> LatencySummary:
    """Per truth window: processing seconds after its end until first served, and until exact
    for good (0 when it was already so at its end: the speed layer serves open windows)."""
    first, exact, first_events = [], [], 0
    for key, value in truth.items():
        end = key[1]
        seen = next((s for s in series if key in s.windows), None)
        after = lambda s: max(Decimal(0), Decimal(str((s.processing_time - end).total_seconds())))
        first.append(None if seen is None else after(seen))
        first_events += 0 if seen is None else seen.windows[key][0]
        settled = None
        for snapshot in reversed(series):
            if snapshot.windows.get(key) != value:
                break
            settled = snapshot
        exact.append(None if settled is None else after(settled))
    return LatencySummary.of_windows(first, exact, first_events, sum(v[0] for v in truth.values()))


def first_result_gaps(series: list[Snapshot], truth: dict[Key, Value]) -> dict[str, list[WindowGap]]:
    """Per currency: ``|first served total - truth|`` of each window whose first answer was wrong."""
    cells: dict[str, list[WindowGap]] = {}
    for key, value in truth.items():
        seen = next((s for s in series if key in s.windows), None)
        served = Decimal(0) if seen is None else seen.windows[key][1]
        if served != value[1]:
            cells.setdefault(key[3], []).append(WindowGap(key[0], key[1], key[2], abs(value[1] - served)))
    return cells


def late_events_of(tables: Tables, prefix: str, configuration: str, disposition: str) -> list[LateBillingEvent]:
    """Every row of the run's side output as an audit row (one per event and window)."""
    name = f"{prefix}late_events"
    if not tables.exists(name):
        return []
    return [
        LateBillingEvent(
            configuration=configuration,
            event_id=r["event_id"],
            account_id=r["account_id"],
            amount=r["amount"],
            currency=r["currency"],
            event_time=_utc(r["event_time"]),
            ingest_time=_utc(r["ingest_time"]),
            lateness_seconds=r["lateness_seconds"],
            window_start=_utc(r["window_start"]),
            window_end=_utc(r["window_end"]),
            disposition=disposition,
        )
        for r in sorted(tables.read_arrow(name).to_pylist(), key=lambda r: (r["ingest_time"], r["segment"], r["line_number"], r["window_start"]))
    ]

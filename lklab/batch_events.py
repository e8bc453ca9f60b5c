"""The days a ``reconciliation`` run covers: every day its ``batch_truth`` asset events recomputed.

An asset-triggered run receives every ``batch_truth`` event since the previous run (Airflow's
``triggering_asset_events``): more than one when batch runs finished while the previous
reconciliation was running or paused, or when a backfill recomputed a week. Every day any of
them covers is reconciled, once each, oldest first. An event covers

* the days listed in its extra, ``{"days": ["YYYY-MM-DD", ...]}`` (an event posted through the
  REST API after a batch run by hand, say), or else
* the UTC day of the logical date of the run that emitted it: ``batch_recompute`` recomputes
  that day (``--date {{ ds }}``).

A run without events (triggered by hand, ``airflow dags test``) covers its own logical date. An
event that names no day is refused with a message naming it, never skipped in silence.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from typing import Any

from shared.catalog import BATCH_TRUTH

__all__ = ["event_days", "days_to_reconcile"]


def event_days(event: Any) -> list[dt.date]:
    """The days one ``batch_truth`` event covers (see the module docstring)."""
    days = (event.extra or {}).get("days")
    if days is not None:
        if not isinstance(days, list) or not days:
            raise ValueError(
                f"{BATCH_TRUTH.name} event {_name(event)}: extra 'days' must be a non-empty list of YYYY-MM-DD, got {days!r}"
            )
        try:
            return [dt.date.fromisoformat(day) for day in days]
        except (TypeError, ValueError):
            raise ValueError(
                f"{BATCH_TRUTH.name} event {_name(event)}: extra 'days' must be YYYY-MM-DD dates, got {days!r}"
            ) from None
    source = event.source_dag_run
    if source is None or source.logical_date is None:
        raise ValueError(
            f"{BATCH_TRUTH.name} event {_name(event)} names no day: it has no extra 'days' and no source run with a "
            'logical date; post it with extra {"days": ["YYYY-MM-DD"]}'
        )
    return [_utc_day(source.logical_date)]


def days_to_reconcile(events_by_asset: Mapping[Any, Iterable[Any]], logical_date: dt.datetime | None) -> list[dt.date]:
    """Every day the events cover (``events_by_asset``: ``triggering_asset_events``), sorted,
    each once; with no events, the run's own ``logical_date``."""
    days = {day for events in events_by_asset.values() for event in events for day in event_days(event)}
    if days:
        return sorted(days)
    if logical_date is None:
        raise ValueError(
            f"no {BATCH_TRUTH.name} event and no logical date: trigger the run with a logical date (the day to reconcile)"
        )
    return [_utc_day(logical_date)]


def _utc_day(moment: dt.datetime) -> dt.date:
    return moment.astimezone(dt.UTC).date()


def _name(event: Any) -> str:
    source = (
        f"{event.source_dag_id}/{event.source_run_id}" if getattr(event, "source_dag_id", None) else "posted by hand"
    )
    return f"of {event.timestamp:%Y-%m-%dT%H:%M:%SZ} ({source})"

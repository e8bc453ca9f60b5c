"""Arrival-delay patterns of the built-in scenarios.

Each scenario says when events *happen* (event time) and how long each takes to *land* in the
log (delay = ingest time - event time). All of them share a long tail: p50 of seconds, p99 of
minutes, p99.9 of hours, from a small share of stragglers whose delay is log-uniform between a
minute and six hours. On top of that:

* ``billing``: point-of-sale terminals and mobile clients go offline for a while and flush their
  buffer when they reconnect: every event of an offline episode lands at the flush.
* ``clickstream``: calm, second-level delays, except one minute in which a CDN hiccup holds 20%
  of the events for 90 seconds.
* ``outage``: a regional outage holds one region's queue for hours; it then drains in order.

All times are integer microseconds (multiples of a millisecond); randomness comes only from the
``numpy`` generator passed in, so a seed reproduces a log exactly.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

import numpy as np

__all__ = ["EPOCH_START", "SCENARIOS", "ScenarioShape", "arrival_delays"]

SECOND = 1_000_000
MINUTE = 60 * SECOND
HOUR = 60 * MINUTE
# The first day of every generated log (2026-01-05, a Monday, UTC), in microseconds.
EPOCH_START = int(datetime(2026, 1, 5, tzinfo=UTC).timestamp()) * SECOND

SCENARIOS = ("billing", "clickstream", "outage")


@dataclass(frozen=True)
class ScenarioShape:
    """The knobs of a delay pattern (shares are fractions of all events)."""

    base_median: int
    base_sigma: float
    straggler_share: float = 0.01
    straggler_min: int = MINUTE
    straggler_max: int = 6 * HOUR


SHAPES = {
    "billing": ScenarioShape(base_median=2 * SECOND, base_sigma=1.0),
    "clickstream": ScenarioShape(base_median=SECOND, base_sigma=0.7),
    "outage": ScenarioShape(base_median=2 * SECOND, base_sigma=1.0),
}


def _log_uniform(rng: np.random.Generator, low: int, high: int, size: int) -> np.ndarray:
    return np.exp(rng.uniform(np.log(low), np.log(high), size)).astype(np.int64)


def _per_group(rng: np.random.Generator, keys: np.ndarray, draw) -> np.ndarray:
    """One random value per distinct key, broadcast back to the rows."""
    unique, inverse = np.unique(keys, return_inverse=True)
    return draw(len(unique))[inverse]


def _common_delays(rng: np.random.Generator, shape: ScenarioShape, n: int) -> np.ndarray:
    delays = (shape.base_median * rng.lognormal(0.0, shape.base_sigma, n)).astype(np.int64)
    stragglers = rng.random(n) < shape.straggler_share
    delays[stragglers] = _log_uniform(rng, shape.straggler_min, shape.straggler_max, int(stragglers.sum()))
    return delays


def _offline_flushes(
    rng: np.random.Generator, event_times: np.ndarray, accounts: np.ndarray, delays: np.ndarray
) -> None:
    """Billing: devices offline for a 15-minute episode flush every buffered event at once."""
    episode = 15 * MINUTE
    devices = accounts.astype(np.int64) * 4 + rng.integers(0, 4, len(accounts))
    phase = _per_group(rng, devices, lambda k: rng.integers(0, episode, k))
    episodes = (event_times + phase) // episode
    keys = devices * 1_000_000_000 + episodes
    offline = _per_group(rng, keys, lambda k: rng.random(k) < 0.01)
    reconnect = _per_group(rng, keys, lambda k: _log_uniform(rng, MINUTE, 3 * HOUR, k))
    episode_end = (episodes + 1) * episode - phase
    flush_at = episode_end + reconnect + rng.integers(0, SECOND, len(event_times))
    delays[offline] = np.maximum(delays[offline], flush_at[offline] - event_times[offline])


def _cdn_hiccup(rng: np.random.Generator, event_times: np.ndarray, start: int, span: int, delays: np.ndarray) -> None:
    """Clickstream: in one minute, 20% of events are held 90 seconds longer."""
    minute = start + (int(span * 0.4) // MINUTE) * MINUTE
    hit = (event_times >= minute) & (event_times < minute + MINUTE) & (rng.random(len(event_times)) < 0.2)
    delays[hit] += 90 * SECOND


def _regional_outage(
    rng: np.random.Generator, event_times: np.ndarray, accounts: np.ndarray, start: int, span: int, delays: np.ndarray
) -> None:
    """Outage: region 0 (every fourth account) is held, then drains in order over 20 minutes."""
    begin = start + (int(span * 0.3) // MINUTE) * MINUTE
    length = min(3 * HOUR, (int(span * 0.4) // MINUTE) * MINUTE)
    held = (accounts % 4 == 0) & (event_times >= begin) & (event_times < begin + length)
    drain = 20 * MINUTE
    released = begin + length + ((event_times[held] - begin) * drain) // max(length, 1)
    delays[held] = released - event_times[held] + delays[held] // 10


def arrival_delays(
    scenario: str,
    rng: np.random.Generator,
    event_times: np.ndarray,
    accounts: np.ndarray,
    start: int,
    span: int,
) -> np.ndarray:
    """Delay of each event in microseconds, rounded to milliseconds (never negative)."""
    if scenario not in SHAPES:
        raise ValueError(f"scenario {scenario!r} is unknown; valid: {', '.join(SCENARIOS)}")
    delays = _common_delays(rng, SHAPES[scenario], len(event_times))
    if scenario == "billing":
        _offline_flushes(rng, event_times, accounts, delays)
    elif scenario == "clickstream":
        _cdn_hiccup(rng, event_times, start, span, delays)
    else:
        _regional_outage(rng, event_times, accounts, start, span, delays)
    return np.maximum(delays, 0) // 1000 * 1000

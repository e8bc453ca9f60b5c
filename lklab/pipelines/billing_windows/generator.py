"""Deterministic scenario logs and the ground truth they imply.

``generate`` draws the events of a scenario, adds retries (exact resends: same ``event_id`` and
payload, landing later) and malformed lines (each of a known rejection reason), orders every
line by ingest time and cuts the log into one segment per ``segment_interval`` of ingest time.
It knows, without Spark, which events are real, so it also writes what a correct pipeline must
compute: ``generator/manifest.json`` (counts, money, expected dead letters by reason, delay
quantiles) and ``generator/events.npz`` (the real events), from which ``lklab.pipelines.billing_windows.truth`` derives
the per-window truth for any window spec.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from decimal import Decimal
from pathlib import Path
from typing import ClassVar

import numpy as np

from lklab.generator_params import ScenarioLogParams
from lklab.progress import progress as track
from lklab.scenarios import EPOCH_START, SECOND, arrival_delays
from reconciliation.result import nearest_rank
from shared import generated_log
from shared.catalog import REPLAY_ROOT
from shared.currencies import MINOR_UNITS
from shared.eventlog import EventLog
from shared.generated_log import EventColumns
from shared.locks import whole_lake

__all__ = [
    "GeneratorParams",
    "GeneratedEvents",
    "GeneratedLog",
    "generate",
    "events_path",
    "load_events",
    "unreplaceable",
    "MALFORMED_KINDS",
    "EPOCH_START",
]

_CURRENCIES = ("USD", "USD", "USD", "USD", "EUR", "EUR", "EUR", "GBP", "JPY", "KWD")
_EVENT_TYPES = np.array(["charge", "refund", "adjustment"])

# kind -> (reason the validator must give, how to spoil a good line)
MALFORMED_KINDS: dict[str, tuple[str, Callable[[dict], str]]] = {
    "truncated": ("not_json", lambda e: json.dumps(e)[: len(json.dumps(e)) // 2]),
    "no_currency": ("missing_field", lambda e: json.dumps({k: v for k, v in e.items() if k != "currency"})),
    "amount_number": ("wrong_type", lambda e: json.dumps({**e, "amount": float(e["amount"])})),
    "amount_text": ("invalid_amount", lambda e: json.dumps({**e, "amount": "12.3.4"})),
    "amount_precise": ("amount_out_of_range", lambda e: json.dumps({**e, "amount": "1.1234567"})),
    "refund_positive": ("amount_sign", lambda e: json.dumps({**e, "event_type": "refund", "amount": "5.00"})),
    "currency_lower": ("invalid_currency", lambda e: json.dumps({**e, "currency": e["currency"].lower()})),
    "time_no_offset": ("invalid_event_time", lambda e: json.dumps({**e, "event_time": e["event_time"][:-1]})),
    "type_unknown": ("invalid_event_type", lambda e: json.dumps({**e, "event_type": "chargeback"})),
    "blank": ("empty_line", lambda e: ""),
}


@dataclass(frozen=True)
class GeneratorParams(ScenarioLogParams):
    """What to generate (``ScenarioLogParams`` and the events' counts). Times are microseconds;
    rates are fractions of ``events``."""

    counts: ClassVar[tuple[str, ...]] = ("events", "accounts")

    events: int = 100_000
    accounts: int = 40


@dataclass(frozen=True)
class GeneratedEvents(EventColumns):
    """The real (valid, unique) events, as columns: ``EventColumns`` and their accounts, currencies,
    types and amounts (minor units)."""

    accounts: np.ndarray
    currencies: np.ndarray
    event_types: np.ndarray
    amount_minor: np.ndarray


@dataclass(frozen=True)
class GeneratedLog:
    events: GeneratedEvents
    manifest: dict


def _iso(micros: np.ndarray) -> np.ndarray:
    return np.char.add(np.datetime_as_string(micros.astype("datetime64[us]"), unit="ms"), "Z")


def _amount_text(minor: np.ndarray, currencies: np.ndarray) -> list[str]:
    out = []
    for value, currency in zip(minor.tolist(), currencies.tolist()):
        places = MINOR_UNITS[currency]
        if places == 0:
            out.append(str(value))
            continue
        sign = "-" if value < 0 else ""
        whole, frac = divmod(abs(value), 10**places)
        out.append(f"{sign}{whole}.{frac:0{places}d}")
    return out


def _draw_events(params: GeneratorParams, rng: np.random.Generator) -> GeneratedEvents:
    n = params.events
    weights = 1.0 / np.arange(1, params.accounts + 1) ** 0.8
    accounts = rng.choice(params.accounts, size=n, p=weights / weights.sum())
    account_currency = np.array(_CURRENCIES)[rng.integers(0, len(_CURRENCIES), params.accounts)]
    currencies = account_currency[accounts]
    event_times = params.start + np.sort(rng.integers(0, params.span // 1000, n)) * 1000
    kinds = rng.choice(3, size=n, p=[0.85, 0.08, 0.07])
    places = np.array([MINOR_UNITS[c] for c in account_currency])[accounts]
    magnitude = np.maximum(1, (rng.lognormal(np.log(25.0), 1.0, n) * 10.0**places).astype(np.int64))
    sign = np.where(kinds == 0, 1, np.where(kinds == 1, -1, rng.choice([-1, 1], n)))
    delays = arrival_delays(params.scenario, rng, event_times, accounts, params.start, params.span)
    return GeneratedEvents(
        event_ids=np.char.add(f"e{params.seed}-", np.char.zfill(np.arange(n).astype(str), 8)),
        accounts=np.char.add("acct-", np.char.zfill(accounts.astype(str), 4)),
        currencies=currencies,
        event_types=_EVENT_TYPES[kinds],
        amount_minor=sign * magnitude,
        event_times=event_times,
        ingest_times=event_times + delays,
    )


def _event_lines(events: GeneratedEvents, index: np.ndarray, ingest_times: np.ndarray) -> list[str]:
    amounts = _amount_text(events.amount_minor[index], events.currencies[index])
    fields = zip(
        events.event_ids[index].tolist(),
        events.accounts[index].tolist(),
        events.event_types[index].tolist(),
        amounts,
        events.currencies[index].tolist(),
        _iso(events.event_times[index]).tolist(),
        _iso(ingest_times).tolist(),
    )
    return [
        f'{{"event_id": "{i}", "account_id": "{a}", "event_type": "{t}", "amount": "{m}", '
        f'"currency": "{c}", "event_time": "{e}", "ingest_time": "{g}"}}'
        for i, a, t, m, c, e, g in fields
    ]


def _malformed_lines(events: GeneratedEvents, rng: np.random.Generator, count: int):
    templates, ingest = generated_log.draw_spoiled(rng, events.ingest_times, count)
    good = _event_lines(events, templates, ingest)
    kinds = list(MALFORMED_KINDS)
    chosen = [kinds[k] for k in rng.integers(0, len(kinds), count)]
    lines, reasons = generated_log.spoiled_lines((json.loads(line) for line in good), chosen, MALFORMED_KINDS)
    return lines, ingest, reasons


def _quantiles(delays: np.ndarray) -> dict[str, float]:
    """Arrival delay quantiles in seconds (nearest rank, the lab's one percentile)."""
    points = {"p50": "0.5", "p99": "0.99", "p99_9": "0.999", "max": "1"}
    ordered = np.sort(delays)
    return {name: float(nearest_rank(ordered, p)) / SECOND for name, p in points.items()}


def unreplaceable(lake: str | Path) -> str | None:
    """Why replacing ``lake`` by a generated scenario would lose something (None: nothing
    would): an always-on stream's checkpoint, or a log the lab did not generate.

    Every always-on stream keeps its checkpoint directly under ``<lake>/checkpoints/`` (the
    billing speed layer ``speed``, unique_visitors ``visitors-speed``, order_payments
    ``payments``); the runs of a comparison or a replay keep theirs under ``kappa/``, and are
    the lab's own to replace."""
    lake = Path(lake)
    checkpoints = lake / "checkpoints"
    runs = REPLAY_ROOT.rstrip("/")
    streams = sorted(p.name for p in checkpoints.iterdir() if p.name != runs) if checkpoints.is_dir() else []
    if streams:
        named = ", ".join(f"checkpoints/{name}" for name in streams)
        return f"is read by a speed layer (it has the checkpoint{'s' if len(streams) > 1 else ''} {named})"
    log = EventLog(lake)
    if not (log.root.exists() and any(log.root.iterdir())):
        return None
    if not (lake / "generator" / "manifest.json").is_file():
        return f"holds a log the lab did not generate ({log.last_segment()} segments)"
    return None


def _prepare_lake(lake: Path, overwrite: bool) -> None:
    log = EventLog(lake)
    if log.root.exists() and any(log.root.iterdir()):
        if not overwrite:
            raise FileExistsError(
                f"{lake} already holds a log ({log.last_segment()} segments); choose another --lake or pass --overwrite"
            )
        for part in ("log", "tables", "generator", "checkpoints", "reports"):
            shutil.rmtree(lake / part, ignore_errors=True)


def generate(
    params: GeneratorParams,
    lake: str | Path,
    *,
    overwrite: bool = False,
    progress: Callable[[str], None] = lambda message: None,
) -> GeneratedLog:
    """Write the scenario's log to ``<lake>/log`` and its manifest; return the real events.

    The lake is locked whole while it is written: refused while any writer runs on it."""
    lake = Path(lake)
    with whole_lake(lake):
        return _generate(params, lake, overwrite, progress)


def _generate(params: GeneratorParams, lake: Path, overwrite: bool, progress: Callable[[str], None]) -> GeneratedLog:
    _prepare_lake(lake, overwrite)
    started = time.monotonic()
    rng = np.random.default_rng(params.seed)
    events = _draw_events(params, rng)
    n = params.events
    retried, retry_ingest = generated_log.draw_resends(rng, events.ingest_times, params.duplicate_rate)
    bad_lines, bad_ingest, bad_reasons = _malformed_lines(events, rng, int(round(n * params.malformed_rate)))
    progress(f"drew {n:,} events, {len(retried):,} retries, {len(bad_lines):,} malformed lines")

    lines = _event_lines(events, np.arange(n), events.ingest_times)
    lines += _event_lines(events, retried, retry_ingest)
    lines += bad_lines
    ingest = np.concatenate([events.ingest_times, retry_ingest, bad_ingest])
    pieces = generated_log.ingest_segments(ingest, params.start, params.segment_interval)
    with track("writing segments", total=len(pieces)) as writing:
        generated_log.append_segments(EventLog(lake), lines, pieces, writing.advance)

    manifest = _manifest(params, events, len(lines), len(retried), bad_reasons, len(pieces))
    manifest["generate_seconds"] = round(time.monotonic() - started, 3)
    (lake / "generator").mkdir(parents=True, exist_ok=True)
    (lake / "generator" / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    generated_log.save_columns(events_path(lake), events)
    return GeneratedLog(events, manifest)


def events_path(lake: str | Path) -> Path:
    """Where the generator keeps the real events of the scenario it wrote into ``lake``."""
    return Path(lake) / "generator" / "events.npz"


def load_events(lake: str | Path) -> GeneratedEvents | None:
    """The real events of the scenario generated into ``lake`` (None if it was not generated)."""
    return generated_log.load_columns(events_path(lake), GeneratedEvents)


def _manifest(params, events: GeneratedEvents, lines: int, duplicates: int, bad_reasons, segments: int) -> dict:
    money: dict[str, Decimal] = {}
    for currency in sorted(set(events.currencies.tolist())):
        total = int(events.amount_minor[events.currencies == currency].sum())
        money[currency] = Decimal(total).scaleb(-MINOR_UNITS[currency])
    reasons: dict[str, int] = {}
    for reason in bad_reasons:
        reasons[reason] = reasons.get(reason, 0) + 1
    return {
        "params": asdict(params),
        "lines": lines,
        "segments": segments,
        "events": int(len(events.event_ids)),
        "duplicates": duplicates,
        "dead_letters": dict(sorted(reasons.items())),
        "money_by_currency": {c: str(v) for c, v in money.items()},
        "delay_seconds": _quantiles(events.ingest_times - events.event_times),
    }

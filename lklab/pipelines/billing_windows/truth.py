"""Ground-truth window totals, computed without Spark.

An independent implementation of the windowing rules of ``shared.windows`` over the
generator's real events, in NumPy with integer money (minor units scaled to 10^-6), so that a
Spark result can be checked against something that does not share its code.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
from deltalake import CommitProperties, DeltaTable, write_deltalake

from lklab.pipelines.billing_windows.generator import GeneratedEvents, events_path
from shared.catalog import GENERATOR_TRUTH, tables_root
from shared.currencies import MINOR_UNITS
from shared.events import AMOUNT_SCALE
from shared.money import from_micros
from shared.windows import SessionWindows, SlidingWindows, TumblingWindows, WindowSpec

__all__ = ["truth_windows", "write_truth", "events_digest", "truth_written_for"]


def _micro_units(events: GeneratedEvents) -> np.ndarray:
    currencies, of_event = np.unique(events.currencies, return_inverse=True)
    scale = np.array([10 ** (AMOUNT_SCALE - MINOR_UNITS[c]) for c in currencies.tolist()], dtype=np.int64)
    return events.amount_minor.astype(np.int64) * scale[of_event]


def _frame(events: GeneratedEvents) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "account_id": events.accounts,
            "currency": events.currencies,
            "event_id": events.event_ids,
            "t": events.event_times.astype(np.int64),
            "amount": _micro_units(events),
        }
    )


def _assign(frame: pd.DataFrame, spec: WindowSpec) -> pd.DataFrame:
    t = frame["t"].to_numpy()
    if isinstance(spec, TumblingWindows):
        start = t - np.mod(t, spec.size)
        return frame.assign(start=start, end=start + spec.size)
    if isinstance(spec, SlidingWindows):
        parts = []
        last = t - np.mod(t, spec.slide)
        for k in range(-(-spec.size // spec.slide)):
            start = last - k * spec.slide
            keep = t < start + spec.size
            parts.append(frame[keep].assign(start=start[keep], end=start[keep] + spec.size))
        return pd.concat(parts, ignore_index=True)
    if isinstance(spec, SessionWindows):
        ordered = frame.sort_values(["account_id", "currency", "t", "event_id"], kind="stable")
        ts = ordered["t"].to_numpy()
        key = (ordered["account_id"] + "\x00" + ordered["currency"]).to_numpy()
        new = np.ones(len(ordered), dtype=bool)
        new[1:] = (key[1:] != key[:-1]) | (ts[1:] - ts[:-1] >= spec.gap)
        session = np.cumsum(new)
        grouped = pd.Series(ts).groupby(session)
        start = grouped.transform("min").to_numpy()
        end = grouped.transform("max").to_numpy() + spec.gap
        return ordered.assign(start=start, end=end)
    raise TypeError(f"not a window spec: {spec!r}")


def truth_windows(events: GeneratedEvents, spec: WindowSpec) -> pa.Table:
    """Per-window totals with the schema of ``shared.aggregation.AGGREGATE_SCHEMA``."""
    windowed = _assign(_frame(events), spec)
    totals = (
        windowed.groupby(["start", "end", "account_id", "currency"], sort=True)
        .agg(event_count=("amount", "size"), amount_total=("amount", "sum"))
        .reset_index()
    )
    as_time = lambda micros: pa.array(micros.to_numpy(), pa.int64()).cast(pa.timestamp("us", tz="UTC"))
    return pa.table(
        {
            "window_start": as_time(totals["start"]),
            "window_end": as_time(totals["end"]),
            "account_id": pa.array(totals["account_id"], pa.string()),
            "currency": pa.array(totals["currency"], pa.string()),
            "event_count": pa.array(totals["event_count"], pa.int64()),
            "amount_total": from_micros(totals["amount_total"].to_numpy()),
        }
    )


def write_truth(events: GeneratedEvents, spec: WindowSpec, lake: str | Path, digest: str | None = None) -> pa.Table:
    """Write ``generator_truth`` for ``spec`` under ``<lake>/tables``, replacing an earlier one.

    The commit records the window spec (``custom_metadata``), since the truth depends on it, and
    ``digest``, the ``events_digest`` of the generated events it was computed from, when given.
    """
    table = truth_windows(events, spec)
    recorded = {"windows": spec.describe(), **({"events": digest} if digest else {})}
    write_deltalake(
        str(tables_root(lake) / GENERATOR_TRUTH.name),
        table,
        mode="overwrite",
        schema_mode="overwrite",
        commit_properties=CommitProperties(custom_metadata=recorded),
    )
    return table


def events_digest(lake: str | Path) -> str | None:
    """SHA-256 of the generated events' file (None: the lake was not generated)."""
    path = events_path(lake)
    if not path.is_file():
        return None
    digest = hashlib.sha256()
    with path.open("rb") as stored:
        for block in iter(lambda: stored.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def truth_written_for(spec: WindowSpec, lake: str | Path, digest: str) -> bool:
    """Whether the last commit of ``generator_truth`` already holds the truth for ``spec`` over the
    generated events of ``digest`` (as after an earlier batch over the same generated log)."""
    path = str(tables_root(lake) / GENERATOR_TRUTH.name)
    if not DeltaTable.is_deltatable(path):
        return False
    (last,) = DeltaTable(path).history(1)
    return last.get("windows") == spec.describe() and last.get("events") == digest

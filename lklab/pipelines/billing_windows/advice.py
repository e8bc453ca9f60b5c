"""``lklab advise`` on billing: the log's (first copy, window) pairs and their money, per currency.

The log is read and parsed as every batch path reads it (``shared.log_source.parsed_log``, with
the run's ``max-clock-skew`` and ``max-line-bytes``: they decide the dead letters), brought to
the driver in log order, and handed to the advisor (``lklab.watermark_advisor``) as:

* every line's ingest time and, for an event (a line neither dead letter nor heartbeat, every
  copy), its event time: the clock;
* the first copy of every ``event_id`` in log order (the batch truth's rule,
  ``shared.dedup``), with each window of ``config.window`` it falls in
  (``shared.windows.assign_windows_table``), keyed by ``(window_start, window_end, account_id,
  currency)``: the pairs, each with its amount in millionths under its currency;
* every later copy, with its first copy's line and event time: the dedup horizon's check.

Tumbling and sliding windows only: a session's shape depends on which events the stream took,
so no single pass gives every delay's sessions (``check`` refuses them; replay the delays wanted).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import SparkSession

from lklab.watermark_advisor import AdvisorLog, Amounts
from shared.clock import NO_TIME, line_keys
from shared.config import LabConfig
from shared.eventlog import written_log
from shared.events import EVENT_COLUMNS
from shared.log_clock import by_line, event_times, micros_or_unknown
from shared.log_source import parsed_log
from shared.money import to_micros
from shared.windows import assign_windows_table, micros

__all__ = ["advisor_log", "check", "prepare"]

_SESSIONS = (
    "lklab advise: sessions merge line by line, so no single pass gives every delay's sessions (replay each "
    "delay wanted: 'lklab replay --name NAME --watermark-delay DELAY')"
)


def check(config: LabConfig) -> None:
    """``ValueError`` for session windows (the module docstring)."""
    config.window.require_fixed(_SESSIONS)


def prepare(config: LabConfig) -> LabConfig:
    """The windows and line settings the lake's batch truth and speed layer were built with, where no flag gives them."""
    from lklab.pipelines.billing_windows.jobs import lake_windows

    return lake_windows(config, "the advisor judges the windows they hold")


def _codes(column: pa.ChunkedArray) -> np.ndarray:
    return pc.dictionary_encode(column.combine_chunks()).indices.to_numpy(zero_copy_only=False).astype(np.int64)


def advisor_log(
    spark: SparkSession, config: LabConfig, allowed_lateness: int | None, progress: Callable[[str], None]
) -> AdvisorLog:
    """The advisor's view of ``config.lake``'s log (the module docstring)."""
    check(config)
    lake, last = written_log(config.lake, "generate or ingest one first")
    progress(f"reading and parsing the log's {last:,} segments")
    parsed = parsed_log(spark, lake, last, max_clock_skew=config.max_clock_skew, max_line_bytes=config.max_line_bytes)
    lines = by_line(parsed.select("segment", "line_number", *EVENT_COLUMNS[2:], "reject_reason", "heartbeat").toArrow())
    progress(f"{lines.num_rows:,} lines: their clock and their (event, window) pairs")
    times = event_times(lines)
    rows = np.flatnonzero(times != NO_TIME)
    events = lines.take(pa.array(rows, pa.int64())).append_column("_line_index", pa.array(rows, pa.int64()))
    ids = _codes(events["event_id"]) if events.num_rows else np.zeros(0, np.int64)
    first_of_id = np.unique(ids, return_index=True)[1] if len(ids) else np.zeros(0, np.int64)
    first = first_of_id[ids] if len(ids) else np.zeros(0, np.int64)
    is_first = first == np.arange(len(ids))
    later = ~is_first
    copies = (rows[later], rows[first[later]], times[rows[first[later]]])
    pairs = assign_windows_table(config.window, events.filter(pa.array(is_first)))
    key = (
        np.stack(
            [
                micros(pairs["window_start"]),
                micros(pairs["window_end"]),
                _codes(pairs["account_id"]),
                _codes(pairs["currency"]),
            ],
            axis=1,
        )
        if pairs.num_rows
        else np.zeros((0, 4), np.int64)
    )
    windows, window_of_pair = np.unique(key, axis=0, return_inverse=True)
    money, currencies = to_micros(pairs["amount"]), np.asarray(pairs["currency"].to_pylist(), dtype=object)
    amounts = {
        currency: Amounts(np.where(currencies == currency, money, 0), 6)
        for currency in sorted(set(currencies.tolist()))
    }
    lateness = config.allowed_lateness if allowed_lateness is None else allowed_lateness
    return AdvisorLog.of(
        keys=line_keys(lines["segment"].to_numpy(), lines["line_number"].to_numpy()),
        ingest=micros_or_unknown(lines["ingest_time"]),
        event_time=times,
        watermark_interval=config.watermark_interval,
        pair_line=pairs["_line_index"].to_numpy(),
        pair_window=np.asarray(window_of_pair, np.int64).reshape(-1),
        window_end=windows[:, 1] if len(windows) else np.zeros(0, np.int64),
        amounts=amounts,
        allowed_lateness=lateness,
        dedup_horizon=config.dedup_horizon,
        copies=copies,
        unit="currency",
    )

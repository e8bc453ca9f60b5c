"""``lklab advise`` on a declared pipeline: its (first copy, window) pairs and their measures.

The log is parsed as the stream parses it (``comparison.ParsedLog``: the declaration's parser,
in the driver) and handed to the advisor (``lklab.watermark_advisor``) as: every line's ingest
time and, for an event (every copy), its event time (the clock); the first copy of every event
id in log order with each of its windows (``FixedWindows.starts``), keyed by
``(window_start, window_end, *keys)``, each measure as an exact count of its smallest unit
(a ``long`` as it is, a ``decimal(p,s)`` in units of ``10**-s``); every later copy with its
first copy's line and event time (the dedup horizon's check). The amounts are per measure
(``unit = "measure"``); the count is the late pairs themselves.

Tumbling and sliding windows only (``check``): sessions merge line by line.
"""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal, localcontext

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import SparkSession

from lklab.pipelines.declared.comparison import ParsedLog
from lklab.pipelines.declared.declaration import Declaration
from lklab.pipelines.declared.window_counts import fixed_windows
from lklab.watermark_advisor import AdvisorLog, Amounts
from shared.clock import NO_TIME, line_keys
from shared.eventlog import written_log
from shared.log_clock import event_times, micros_or_unknown

__all__ = ["check", "advisor_log_of", "advisor_log"]

_WHAT = "lklab advise (sessions merge line by line: replay each delay wanted)"


def check(d: Declaration, config=None) -> None:
    """``ValueError`` unless ``d`` declares tumbling or sliding windows."""
    fixed_windows(d, _WHAT)


def _units(value: int | Decimal, scale: int) -> int:
    """A measure's value as an exact count of ``10**-scale`` (it has no more decimals: the parser checked)."""
    with localcontext() as exact:
        exact.prec = 100  # above any measure's 38 digits: nothing rounds
        return int(Decimal(value).scaleb(scale))


def advisor_log_of(d: Declaration, lines: pa.Table, allowed_lateness: int | None = None) -> AdvisorLog:
    """The advisor's view of ``lines`` (``parse_declared_lines`` rows in log order)."""
    window = fixed_windows(d, _WHAT)
    times = event_times(lines)
    rows = np.flatnonzero(times != NO_TIME)
    ids = lines["event_id"].take(pa.array(rows, pa.int64()))
    codes = pc.dictionary_encode(ids.combine_chunks()).indices.to_numpy(zero_copy_only=False) if len(rows) else rows
    first_of_id = np.unique(codes, return_index=True)[1] if len(rows) else rows
    first = first_of_id[codes] if len(rows) else rows
    later = first != np.arange(len(rows))
    firsts = rows[~later]
    columns = {name: lines[name].to_pylist() for name in (*d.keys, *(m.name for m in d.measures))}
    windows: dict[tuple, int] = {}
    ends, pair_line, pair_window, units = [], [], [], {m.name: [] for m in d.measures}
    for line in firsts.tolist():
        keys = tuple(columns[k][line] for k in d.keys)
        for start in window.starts(int(times[line])):
            key = (start, start + window.size, *keys)
            if key not in windows:
                windows[key] = len(ends)
                ends.append(start + window.size)
            pair_line.append(line)
            pair_window.append(windows[key])
            for m in d.measures:
                units[m.name].append(_units(columns[m.name][line], m.scale if m.type == "decimal" else 0))
    amounts = {
        m.name: Amounts(np.array(units[m.name], dtype=object), m.scale if m.type == "decimal" else 0)
        for m in d.measures
    }
    return AdvisorLog.of(
        keys=line_keys(lines["segment"].to_numpy(), lines["line_number"].to_numpy()),
        ingest=micros_or_unknown(lines["ingest_time"]),
        event_time=times,
        watermark_interval=d.watermark_interval,
        pair_line=np.array(pair_line, np.int64),
        pair_window=np.array(pair_window, np.int64),
        window_end=np.array(ends, np.int64),
        amounts=amounts,
        allowed_lateness=d.allowed_lateness if allowed_lateness is None else allowed_lateness,
        dedup_horizon=d.dedup_horizon,
        copies=(rows[later], rows[first[later]], times[rows[first[later]]]),
        unit="measure",
    )


def advisor_log(
    d: Declaration, spark: SparkSession, config, allowed_lateness: int | None, progress: Callable[[str], None]
) -> AdvisorLog:
    """The advisor's view of ``config.lake``'s log of the pipeline ``d`` declares."""
    check(d)
    lake, last = written_log(config.lake, f"append your lines with 'lklab ingest --pipeline {d.name}'")
    progress(f"reading and parsing the log's {last:,} segments")
    log = ParsedLog.read(spark, d, lake, last)
    progress(f"{log.lines.num_rows:,} lines: their clock and their (event, window) pairs")
    return advisor_log_of(d, log.lines, allowed_lateness)

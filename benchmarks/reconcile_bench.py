"""Window diff of two 1,000,000-row aggregate tables: the lab against datacompy, same process.

Both sides get the same pair, written as Delta tables: ``truth`` (random windows, accounts,
currencies and exact decimal totals) and ``stream`` = truth with 1% of the windows missing, 1%
changed by one event and 0.5% extra. datacompy's ``PandasCompare`` (join on the window key,
exact) runs on the two tables already loaded into pandas (loading excluded). The lab's side is
timed from the Delta tables on disk: ``diff_windows`` (full outer join, statuses, deltas under
the tolerance rule) and ``currency_figures`` (per-currency counts, money, errors), the part of
``lklab reconcile`` that does not read the log. The line-by-line attribution needs the log
and is measured by ``lklab reconcile`` on a real lake instead (see the README).

    .venv/bin/python benchmarks/reconcile_bench.py [ROWS]
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

from reconciliation.diff import diff_windows
from reconciliation.metrics import currency_figures, explained_diff
from reconciliation.tolerance import Tolerance
from shared.config import LabConfig
from shared.spark_session import spark_session
from shared.tables import Tables

KEY = ["window_start", "window_end", "account_id", "currency"]
CURRENCIES = np.array(["EUR", "GBP", "JPY", "USD"])


def progress(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def tables_pair(rows: int, seed: int = 7) -> tuple[pa.Table, pa.Table]:
    """A truth of ``rows`` distinct windows and a stream that differs from it in known ways."""
    rng = np.random.default_rng(seed)
    accounts = 2_000
    slot = np.arange(rows)
    starts = np.datetime64("2026-01-05T00:00:00", "us") + (slot // accounts) * np.timedelta64(60, "s")
    account = np.char.add("acct-", (slot % accounts).astype(str))
    currency = CURRENCIES[slot % accounts % 4]
    counts = rng.integers(1, 20, rows)
    units = rng.integers(-100, 5_000, rows)

    def table(idx: np.ndarray, count: np.ndarray, unit: np.ndarray) -> pa.Table:
        return pa.table({
            "window_start": pa.array(starts[idx], pa.timestamp("us", tz="UTC")),
            "window_end": pa.array(starts[idx] + np.timedelta64(60, "s"), pa.timestamp("us", tz="UTC")),
            "account_id": account[idx], "currency": currency[idx],
            "event_count": pa.array(count, pa.int64()),
            # whole units as DECIMAL(38, 6), the lab's total type
            "amount_total": pa.array(unit, pa.int64()).cast(pa.decimal128(38, 6)),
        })

    truth = table(slot, counts, units)
    fate = rng.random(rows)
    kept = slot[fate >= 0.01]
    changed = fate[kept] < 0.02
    stream_counts = counts[kept] - changed.astype(int)
    stream_units = units[kept] - np.where(changed, rng.integers(1, 1_000, kept.size), 0)
    stream = table(kept, stream_counts, stream_units)
    extra = rows // 200
    stream_extra = table(slot[:extra], counts[:extra], units[:extra])
    shifted = np.timedelta64(365, "D")
    stream_extra = stream_extra.set_column(0, "window_start", pa.array(starts[:extra] - shifted, pa.timestamp("us", tz="UTC")))
    stream_extra = stream_extra.set_column(1, "window_end", pa.array(starts[:extra] - shifted + np.timedelta64(60, "s"), pa.timestamp("us", tz="UTC")))
    return truth, pa.concat_tables([stream, stream_extra])


def ours(spark, lake: Path) -> tuple[float, dict]:
    tables = Tables(spark, lake, "deltalake")
    started = time.perf_counter()
    truth, stream = tables.read("truth"), tables.read("stream")
    diff = diff_windows(truth, stream, Tolerance())
    empty = spark.createDataFrame([], "window_start timestamp, window_end timestamp, account_id string, currency string, reason string, events long, money decimal(38,6)")
    windows = explained_diff(diff, empty).persist()
    figures = currency_figures(windows, windows, spark.createDataFrame([], "currency string, amount decimal(20,6), lateness_seconds decimal(20,6)"))
    windows.unpersist()
    seconds = time.perf_counter() - started
    statuses: dict[str, int] = {}
    for c in figures:
        for status, n in c.status_counts.items():
            statuses[status] = statuses.get(status, 0) + n
    return seconds, statuses


def theirs(truth_pd, stream_pd) -> tuple[float, dict]:
    from datacompy import PandasCompare

    started = time.perf_counter()
    compare = PandasCompare(truth_pd, stream_pd, join_columns=KEY, abs_tol=0, rel_tol=0)
    matching = compare.intersect_rows[compare.intersect_rows["event_count_match"] & compare.intersect_rows["amount_total_match"]]
    result = {
        "match": len(matching),
        "value_mismatch": len(compare.intersect_rows) - len(matching),
        "missing_in_stream": len(compare.df1_unq_rows),
        "extra_in_stream": len(compare.df2_unq_rows),
    }
    compare.report()
    return time.perf_counter() - started, result


def main() -> None:
    rows = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
    with tempfile.TemporaryDirectory() as scratch:
        lake = Path(scratch)
        progress(f"building two aggregate tables of about {rows:,} rows")
        truth, stream = tables_pair(rows)
        write_deltalake(str(lake / "tables" / "truth"), truth)
        write_deltalake(str(lake / "tables" / "stream"), stream)
        spark = spark_session(LabConfig(lake=lake, table_engine="deltalake"), "lklab-reconcile-bench")
        progress("warm-up (small pair)")
        small_truth, small_stream = tables_pair(10_000, seed=1)
        write_deltalake(str(lake / "tables" / "warm_truth"), small_truth)
        write_deltalake(str(lake / "tables" / "warm_stream"), small_stream)
        ours(spark, lake)
        progress("measured: lab diff + figures")
        our_seconds, our_statuses = ours(spark, lake)
        progress("measured: datacompy PandasCompare (+ report)")
        truth_pd = DeltaTable(str(lake / "tables" / "truth")).to_pyarrow_dataset().to_table().to_pandas()
        stream_pd = DeltaTable(str(lake / "tables" / "stream")).to_pyarrow_dataset().to_table().to_pandas()
        their_seconds, their_statuses = theirs(truth_pd, stream_pd)
        spark.stop()
    print(f"pair: truth {truth.num_rows:,} rows, stream {stream.num_rows:,} rows")
    print(f"statuses (lab):       {our_statuses}")
    print(f"statuses (datacompy): {their_statuses}")
    assert our_statuses == their_statuses, "the two diffs disagree"
    print(f"lab diff + per-currency figures (Spark, from Delta): {our_seconds:7.1f}s")
    print(f"datacompy PandasCompare + report (from pandas):    {their_seconds:7.1f}s")
    print(f"ratio datacompy / lab (time): {their_seconds / our_seconds:.2f}x")


if __name__ == "__main__":
    main()

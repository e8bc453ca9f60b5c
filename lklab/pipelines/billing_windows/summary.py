"""What a batch run produced, computed from the tables, then rendered as text.

``batch_summary`` reads the written tables and returns a ``BatchSummary`` (numbers only);
``render_text``, the lab's text renderer (``reconciliation.render``), turns it into the lines
``lklab batch`` and ``lklab demo`` print.

The figures are Spark aggregations over the requested days of the tables: what reaches the
driver does not grow with the log (counts, a total per currency, the largest windows). Only on a
generated lake are the days' windows read into the driver, to compare them with the generator's
truth, which the generator computed there from every event anyway.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from reconciliation.render import grouped, render_text
from shared.aggregation import AGGREGATE_COLUMNS
from shared.batch_runs import BatchRun
from shared.catalog import BATCH_DEAD_LETTER, BATCH_EVENTS, BATCH_TRUTH, GENERATOR_TRUTH
from shared.tables import Tables

if TYPE_CHECKING:
    from shared.windows import WindowSpec

__all__ = ["BatchSummary", "batch_summary", "largest_windows", "render_text", "same_rows"]


@dataclass(frozen=True)
class BatchSummary:
    run: BatchRun
    window_description: str
    dead_letters_by_reason: dict[str, int]
    windows: int
    accounts: int
    money_by_currency: dict[str, Decimal]
    largest_windows: tuple[dict, ...]
    matches_generator_truth: bool | None
    windows_overlap: bool = False  # an event counts in every window it is in: a sum over them is no total


def same_rows(left: pa.Table, right: pa.Table) -> bool:
    """Both tables hold the same window rows, whatever their order (compared in Arrow, the right
    side's columns cast to the left's types first: equal values, whatever their declared widths)."""
    keys = [(name, "ascending") for name in AGGREGATE_COLUMNS[:4]]
    left, right = left.select(list(AGGREGATE_COLUMNS)), right.select(list(AGGREGATE_COLUMNS))
    if left.num_rows != right.num_rows:
        return False
    if right.schema != left.schema:
        try:
            right = right.cast(left.schema)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):  # values of another kind: not the same rows
            return False
    return left.sort_by(keys).equals(right.sort_by(keys))


def largest_windows(truth: DataFrame, top: int) -> tuple[dict, ...]:
    """The ``top`` window rows with the largest absolute amount (ties: earlier window, then
    account, then currency first), ranked by Spark: only those rows reach the driver."""
    if top <= 0:
        return ()
    order = [F.abs("amount_total").desc(), F.col("window_start"), F.col("account_id"), F.col("currency")]
    return tuple(truth.select(*AGGREGATE_COLUMNS).orderBy(*order).limit(top).toArrow().to_pylist())


def batch_summary(tables: Tables, run: BatchRun, window: WindowSpec, top: int = 5) -> BatchSummary:
    truth = tables.read(BATCH_TRUTH.name).where(run.days.contains(F.col("window_start")))
    dead = tables.read(BATCH_DEAD_LETTER.name).where(F.col("segment") <= run.last_segment)
    reasons = {row["reject_reason"]: row["count"] for row in dead.groupBy("reject_reason").count().collect()}
    # one job: a row per currency, and one for all of them (currency null: its own grouping)
    figures = (
        truth.rollup("currency")
        .agg(
            F.count(F.lit(1)).alias("windows"),
            F.count_distinct("account_id").alias("accounts"),
            F.sum("amount_total").alias("total"),
            F.grouping("currency").alias("every_currency"),
        )
        .collect()
    )
    size = next(
        (row for row in figures if row["every_currency"]), {"windows": 0, "accounts": 0}
    )  # no row without windows
    money = {row["currency"]: row["total"] for row in figures if not row["every_currency"]}
    return BatchSummary(
        run=run,
        window_description=window.describe(),
        dead_letters_by_reason=dict(sorted(reasons.items())),
        windows=size["windows"],
        accounts=size["accounts"],
        money_by_currency=dict(sorted(money.items())),
        largest_windows=largest_windows(truth, top),
        matches_generator_truth=(
            same_rows(
                run.days.select(tables.read_arrow(BATCH_TRUTH.name)),
                run.days.select(tables.read_arrow(GENERATOR_TRUTH.name)),
            )
            if tables.exists(GENERATOR_TRUTH.name)
            else None
        ),
        windows_overlap=window.overlaps,
    )


def _segments_read(run: BatchRun) -> str:
    if run.first_segment == 1:
        return f"segments 1..{run.last_segment}"
    known = f"1..{run.first_segment - 1} known from {BATCH_EVENTS.name}"
    if run.first_segment > run.last_segment:
        return f"no segment read ({known})"
    return f"segments {run.first_segment}..{run.last_segment} read ({known})"


@render_text.register
def _render_batch_summary(summary: BatchSummary) -> str:
    run = summary.run
    lines = [
        f"days: {run.days.describe()}; log: {_segments_read(run)}, {grouped(run.lines)} lines",
        f"  = {grouped(run.events)} events + {grouped(run.duplicates)} duplicates + {grouped(run.dead_letters)} dead letters"
        + (f" + {grouped(run.heartbeats)} heartbeats" if run.heartbeats else "")
        + f"  [{'conserved' if run.conserved else 'NOT CONSERVED'}]",
    ]
    for reason, count in summary.dead_letters_by_reason.items():
        lines.append(f"    dead letter {reason}: {grouped(count)}")
    lines.append(
        f"windows ({summary.window_description}): {grouped(summary.windows)} rows over {grouped(summary.accounts)} accounts"
    )
    label = (
        "sum over overlapping windows (each event counted in every window it is in)"
        if summary.windows_overlap
        else "total"
    )
    for currency, total in summary.money_by_currency.items():
        lines.append(f"  {currency} {label}: {grouped(total)}")
    lines.append("largest windows by |amount|:")
    for row in summary.largest_windows:
        lines.append(
            f"  {row['window_start']:%Y-%m-%d %H:%M:%S} .. {row['window_end']:%H:%M:%S}  "
            f"{row['account_id']:<10} {row['currency']}  {row['event_count']:>6,} events  "
            f"{row['amount_total']:>16,}"
        )
    lines.append(f"cost: {run.wall_seconds:.1f} s wall, {run.cpu_seconds:.1f} CPU seconds")
    if summary.matches_generator_truth is not None:
        verdict = "yes, exactly" if summary.matches_generator_truth else "NO"
        lines.append(f"equals the generator's ground truth: {verdict}")
    return "\n".join(lines)

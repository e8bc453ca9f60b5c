"""Billing's reconciliation, run by the reconcile runner as every pipeline's is.

The runner (``lklab.reconcile_runner``) takes the locks (one reconcile per stream; the truth
read while no recompute rewrites it), refuses missing inputs, and reads the stream at the cut of
its last completed micro-batch. What billing brings is its rule over those sides
(``reconciliation.reconcile``): the windows of the days asked compared money-exactly per
currency, every gap explained from the log, the late side output folded in, the result and its
tables written once per run id.
"""

from __future__ import annotations

from pyspark.sql import SparkSession

from lklab.pipelines.billing_windows.speed import SPEED_RULE
from lklab.reconcile_runner import ReconcileRule, Sides, reconcile_stream
from reconciliation.reconcile import commit, compute, truth_position
from reconciliation.result import Reconciliation
from reconciliation.tolerance import Tolerance
from shared import catalog
from shared.config import LabConfig
from shared.partitions import DayRange
from shared.stream_cut import StreamCut
from shared.tables import Tables

__all__ = ["BILLING_RECONCILE", "reconcile"]


def _truth_position(tables: Tables, *, days: DayRange, **_) -> int | None:
    """How far the batch recompute of ``days`` read the log (None: no truth at all;
    ``ReconcileInputError``: none for those days, or days computed from different positions)."""
    if not tables.exists(catalog.BATCH_TRUTH.name):
        return None
    return truth_position(tables, days)


def _compare(
    sides: Sides, *, days: DayRange, tolerance: Tolerance, write: bool, gaps_shown: int, split_from_windows: int | None
) -> Reconciliation:
    cut = StreamCut(sides.batch, sides.stream_versions)
    result, outputs = compute(
        sides.tables,
        sides.config,
        sides.prefix,
        days,
        sides.against,
        tolerance,
        gaps_shown,
        cut=cut,
        split_from_windows=split_from_windows,
    )
    try:
        if write:
            commit(sides.tables, sides.config, sides.prefix, result, outputs)
    finally:
        outputs.release()
    return result


BILLING_RECONCILE = ReconcileRule(
    pipeline="billing_windows",
    stream=SPEED_RULE,
    stream_tables=catalog.STREAM_OUTPUTS,
    truth_tables=catalog.BATCH_TABLES,
    truth_position=_truth_position,
    compare=_compare,
)


def reconcile(
    spark: SparkSession,
    config: LabConfig,
    days: DayRange = DayRange(),
    *,
    against: str = "speed",
    tolerance: Tolerance = Tolerance(),
    write: bool = True,
    gaps_shown: int = 10,
    split_from_windows: int | None = None,
) -> Reconciliation:
    """Reconcile ``against`` (``speed`` or ``kappa:<RUN>``) with the batch truth for ``days``
    (no days: every day ``batch_truth`` holds), and with ``write`` commit the result
    (``reconciliation.reconcile``; ``split_from_windows``: where the agreeing windows are split
    off, None for ``reconciliation.agreeing.SPLIT_FROM_WINDOWS``)."""
    return reconcile_stream(
        spark,
        config,
        BILLING_RECONCILE,
        against,
        days=days,
        tolerance=tolerance,
        write=write,
        gaps_shown=gaps_shown,
        split_from_windows=split_from_windows,
    )

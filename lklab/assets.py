"""The Airflow assets the lab's DAGs produce and are scheduled on: one per Delta table.

An asset is named after its table and identified by ``x-lklab://tables/<table>``. The URI does
not hold the lake's path: the lake is configuration, read when a task runs, while assets are
declared when a DAG file is parsed, and Airflow identifies an asset by its name and URI, so the
same table must have the same asset wherever and on whichever lake it runs. Airflow gives
schemes prefixed ``x-`` no meaning of its own and never validates them.

Only ``airflow.sdk`` and the table catalog (names only; it imports no Arrow or Spark) are
imported here: a DAG file imports this module when it is parsed.
"""

from __future__ import annotations

from airflow.sdk import Asset

from lklab.pipelines.order_payments.tables import PAYMENTS_TRUTH_MATCHED, PAYMENTS_TRUTH_ORPHANS, PAYMENTS_TRUTH_UNPAID
from lklab.pipelines.unique_visitors.tables import VISITORS_CORRECTED, VISITORS_TRUTH
from reconciliation.tables import RECON_RUNS
from shared import catalog

__all__ = [
    "batch_truth",
    "recon_runs",
    "replay_runs",
    "visitors_truth",
    "visitors_corrected",
    "payments_truth_matched",
    "payments_truth_unpaid",
    "payments_truth_orphans",
    "table_asset",
]

SCHEME = "x-lklab"


def table_asset(table: catalog.Table) -> Asset:
    """The asset standing for the lake's table ``table`` (``<lake>/tables/<name>``)."""
    return Asset(name=table.name, uri=f"{SCHEME}://tables/{table.name}")


batch_truth = table_asset(catalog.BATCH_TRUTH)  # batch_recompute writes it; reconciliation is scheduled on it
recon_runs = table_asset(RECON_RUNS)  # reconciliation's record of each run
replay_runs = table_asset(catalog.REPLAY_RUNS)  # kappa_replay's record of each replay

# The newer pipelines' (``lklab.pipeline_dags``): their nightly batch writes the truth tables, and
# the unique_visitors reconcile its corrected windows (order_payments' writes a CSV report, no table).
visitors_truth = table_asset(VISITORS_TRUTH)
visitors_corrected = table_asset(VISITORS_CORRECTED)
payments_truth_matched = table_asset(PAYMENTS_TRUTH_MATCHED)
payments_truth_unpaid = table_asset(PAYMENTS_TRUTH_UNPAID)
payments_truth_orphans = table_asset(PAYMENTS_TRUTH_ORPHANS)

"""The Airflow assets the lab's DAGs produce and are scheduled on: one per Delta table.

An asset is named after its table and identified by ``x-lklab://tables/<table>``. The URI does
not hold the lake's path: the lake is configuration, read when a task runs, while assets are
declared when a DAG file is parsed, and Airflow identifies an asset by its name and URI, so the
same table must have the same asset wherever and on whichever lake it runs. Airflow gives
schemes prefixed ``x-`` no meaning of its own and never validates them.

Only ``airflow.sdk``, the table catalog and the pipelines' declarations (names only; they import
no Arrow or Spark) are imported here: a DAG file imports this module when it is parsed.
"""

from __future__ import annotations

from airflow.sdk import Asset

from lklab.pipelines import REGISTRY
from reconciliation.tables import RECON_RUNS
from shared import catalog

__all__ = [
    "batch_truth",
    "recon_runs",
    "replay_runs",
    "PIPELINE_ASSETS",
    "table_asset",
]

SCHEME = "x-lklab"


def table_asset(table: catalog.Table) -> Asset:
    """The asset standing for the lake's table ``table`` (``<lake>/tables/<name>``)."""
    return Asset(name=table.name, uri=f"{SCHEME}://tables/{table.name}")


batch_truth = table_asset(catalog.BATCH_TRUTH)  # batch_recompute writes it; reconciliation is scheduled on it
recon_runs = table_asset(RECON_RUNS)  # reconciliation's record of each run
replay_runs = table_asset(catalog.REPLAY_RUNS)  # kappa_replay's record of each replay

# Every pipeline's that declares DAGs (``Pipeline.dags``, made by ``lklab.pipeline_dags``): its
# batch writes its truth tables, its reconcile and its replay the tables they declare
# (order_payments' and running_max's reconcile writes none), by table name.
PIPELINE_ASSETS = {
    table.name: table_asset(table)
    for pipeline in REGISTRY.values()
    if pipeline.dags is not None
    for table in (*pipeline.dags.truth, *pipeline.dags.reconciled, *pipeline.dags.replayed)
}

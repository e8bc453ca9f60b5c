"""The reconciliation's tables: ``recon_runs``, ``recon_diffs``, ``recon_corrections`` and, per stream,
``corrected_aggregates``; and those of a reconciliation of any two tables, ``table_recon_runs`` and
``table_recon_diffs`` (``reconciliation.table_reconcile``). Their rows are defined with the results (``reconciliation.recon_tables``); naming a
table imports neither Arrow nor Spark.
"""

from __future__ import annotations

from shared.catalog import Table

__all__ = [
    "CORRECTED_AGGREGATES",
    "RECON_RUNS",
    "RECON_DIFFS",
    "RECON_CORRECTIONS",
    "TABLE_RECON_RUNS",
    "TABLE_RECON_DIFFS",
]

# The reconciliation's (``corrected_aggregates`` is per stream: under the stream's prefix). Its
# rows are the reconciliation's results: their schemas are defined with them.
CORRECTED_AGGREGATES = Table("corrected_aggregates", "reconciliation.recon_tables:CORRECTED_SCHEMA")
RECON_RUNS = Table("recon_runs", "reconciliation.recon_tables:RUNS_SCHEMA")
RECON_DIFFS = Table("recon_diffs", "reconciliation.recon_tables:DIFFS_SCHEMA")
RECON_CORRECTIONS = Table("recon_corrections", "reconciliation.recon_tables:CORRECTIONS_SCHEMA")

# A reconciliation of two tables the lab did not write (``lklab reconcile --truth-table ...``):
# keys and measures differ from run to run, so a row holds them as JSON text.
TABLE_RECON_RUNS = Table("table_recon_runs", "reconciliation.table_reconcile:RUNS_SCHEMA")
TABLE_RECON_DIFFS = Table("table_recon_diffs", "reconciliation.table_reconcile:DIFFS_SCHEMA")

"""The rows a reconciliation writes: the schemas of ``recon_runs``, ``recon_diffs``,
``recon_corrections`` and ``corrected_aggregates`` (``shared.catalog`` names the tables and
points here).

* ``recon_runs``: one row per run and currency, the figures of ``CurrencyReconciliation``
  (money ``DECIMAL(38, 6)``, lateness seconds ``DECIMAL(20, 6)``, rates as floats) and, per
  attribution reason, the events and money it explains;
* ``recon_diffs``: every compared window of a run, ``DIFF_COLUMNS`` then ``EXPLAINED_COLUMNS``;
* ``recon_corrections``: the deltas a consumer of the stream applies, per changed window;
* ``corrected_aggregates``: the stream's windows with the late events folded in.

Each row of the last two starts with the run it belongs to (``run_id``, ``against``).
"""

from __future__ import annotations

import pyarrow as pa

from reconciliation.attribution import REASONS
from reconciliation.diff import DIFF_COLUMNS
from reconciliation.metrics import EXPLAINED_COLUMNS
from shared.aggregation import AGGREGATE_ARROW_SCHEMA, AMOUNT_TOTAL_ARROW_TYPE, WINDOW_KEY
from shared.watermark import LATENESS_TYPE

__all__ = ["RUNS_SCHEMA", "DIFFS_SCHEMA", "CORRECTIONS_SCHEMA", "CORRECTED_SCHEMA"]

_MONEY = AMOUNT_TOTAL_ARROW_TYPE
_RUN = [pa.field("run_id", pa.string()), pa.field("against", pa.string())]
_WINDOW = [AGGREGATE_ARROW_SCHEMA.field(name) for name in WINDOW_KEY]


def _diff_field(name: str) -> pa.Field:
    """A column of the diff: ``status`` text, money (``*_amount``, ``*_money``, ``amount_delta``)
    decimal, every other one a count (``*_count``, ``*_events``, ``count_delta``)."""
    if name == "status":
        return pa.field(name, pa.string())
    return pa.field(name, _MONEY if name.endswith(("_amount", "_money", "amount_delta")) else pa.int64())


RUNS_SCHEMA = pa.schema(
    [
        pa.field("run_id", pa.string()),
        pa.field("recorded_at", pa.timestamp("us", tz="UTC")),
        pa.field("against", pa.string()),
        pa.field("date_from", pa.date32()),
        pa.field("date_to", pa.date32()),
        pa.field("windows", pa.string()),
        pa.field("tolerance", pa.string()),
        pa.field("batch_last_segment", pa.int64()),
        pa.field("stream_last_segment", pa.int64()),
        pa.field("stream_batch", pa.int64()),
        pa.field("stream_versions", pa.string()),  # JSON: {table: Delta version read}
        pa.field("currency", pa.string()),
        pa.field("windows_compared", pa.int64()),
        pa.field("windows_matched", pa.int64()),
        pa.field("exact_match_rate", pa.float64()),
        pa.field("truth_amount", _MONEY),
        pa.field("stream_amount", _MONEY),
        pa.field("completeness", pa.float64()),
        pa.field("total_abs_error", _MONEY),
        pa.field("max_rel_error", pa.float64()),
        pa.field("late_events", pa.int64()),
        pa.field("late_amount", _MONEY),
        *[pa.field(f"lateness_{p}_seconds", LATENESS_TYPE) for p in ("p50", "p99", "p99_9", "max")],
        pa.field("unexplained_windows", pa.int64()),
        pa.field("unexplained_events", pa.int64()),
        pa.field("unexplained_amount", _MONEY),
        pa.field("corrected_equals_truth", pa.bool_()),
        pa.field("corrected_unexplained_events", pa.int64()),
        pa.field("corrected_unexplained_amount", _MONEY),
        *[field for reason in REASONS for field in (
            pa.field(f"explained_{reason}_events", pa.int64()), pa.field(f"explained_{reason}_amount", _MONEY)
        )],
    ]
)

DIFFS_SCHEMA = pa.schema([*_RUN, *_WINDOW, *[_diff_field(c) for c in (*DIFF_COLUMNS, *EXPLAINED_COLUMNS) if c not in WINDOW_KEY]])

CORRECTIONS_SCHEMA = pa.schema(  # ``kind``: ``reconciliation.fold.CORRECTION_KINDS``
    [*_RUN, *_WINDOW, pa.field("kind", pa.string()), pa.field("add_events", pa.int64()), pa.field("add_amount", _MONEY)]
)

# ``corrected_aggregates``: the stream's windows with the side output folded in, and the share of
# each window the fold added (``reconciliation.fold.corrected_rows``).
CORRECTED_SCHEMA = pa.schema([*AGGREGATE_ARROW_SCHEMA, pa.field("late_events", pa.int64()), pa.field("late_amount", _MONEY)])

"""The rows a reconciliation writes: the schemas of ``recon_runs``, ``recon_diffs``,
``recon_corrections`` and ``corrected_aggregates`` (``shared.catalog`` names the tables and
points here).

* ``recon_runs``: one row per run and currency, the figures of ``CurrencyReconciliation``
  (money ``DECIMAL(38, 6)``, lateness seconds ``DECIMAL(20, 6)``, rates as floats) and, per
  attribution reason, the events and money it explains;
* ``recon_diffs``: every compared window of a run that differs or that a reason explains,
  ``DIFF_COLUMNS`` then ``EXPLAINED_COLUMNS``;
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


_TEXT, _COUNT, _RATE = pa.string(), pa.int64(), pa.float64()
RUNS_SCHEMA = pa.schema(
    {
        # the run: what was compared with what, how far each side had read
        "run_id": _TEXT,
        "recorded_at": pa.timestamp("us", tz="UTC"),
        "against": _TEXT,
        "date_from": pa.date32(),
        "date_to": pa.date32(),
        "windows": _TEXT,
        "tolerance": _TEXT,
        "batch_last_segment": _COUNT,
        "stream_last_segment": _COUNT,
        "stream_batch": _COUNT,
        "stream_versions": _TEXT,  # JSON: {table: version read}
        # one currency's figures
        "currency": _TEXT,
        "windows_compared": _COUNT,
        "windows_matched": _COUNT,
        "exact_match_rate": _RATE,
        "truth_amount": _MONEY,
        "stream_amount": _MONEY,
        "completeness": _RATE,
        "total_abs_error": _MONEY,
        "max_rel_error": _RATE,
        "late_events": _COUNT,
        "late_amount": _MONEY,
        **{f"lateness_{p}_seconds": LATENESS_TYPE for p in ("p50", "p99", "p99_9", "max")},
        "unexplained_windows": _COUNT,
        "unexplained_events": _COUNT,
        "unexplained_amount": _MONEY,
        "corrected_equals_truth": pa.bool_(),
        "corrected_unexplained_events": _COUNT,
        "corrected_unexplained_amount": _MONEY,
        **{
            name: kind
            for reason in REASONS
            for name, kind in ((f"explained_{reason}_events", _COUNT), (f"explained_{reason}_amount", _MONEY))
        },
    }
)

DIFFS_SCHEMA = pa.schema(
    [*_RUN, *_WINDOW, *[_diff_field(c) for c in (*DIFF_COLUMNS, *EXPLAINED_COLUMNS) if c not in WINDOW_KEY]]
)

CORRECTIONS_SCHEMA = pa.schema(  # ``kind``: ``reconciliation.fold.CORRECTION_KINDS``
    [*_RUN, *_WINDOW, pa.field("kind", _TEXT), pa.field("add_events", _COUNT), pa.field("add_amount", _MONEY)]
)

# ``corrected_aggregates``: the stream's windows with the side output folded in, and the share of
# each window the fold added (``reconciliation.fold.corrected_rows``).
CORRECTED_SCHEMA = pa.schema(
    [*AGGREGATE_ARROW_SCHEMA, pa.field("late_events", _COUNT), pa.field("late_amount", _MONEY)]
)

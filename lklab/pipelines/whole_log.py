"""Flags that a pipeline whose truth is recomputed from the whole log has no use for.

``billing_windows`` recomputes its truth day by day, reconciles sums with money tolerances and a
JSON summary, and records a replay's window history; a pipeline whose batch recomputes the
whole log and whose reconciliation compares what the stream served (sets, not sums) has none of
these, and declares ``WHOLE_LOG_RULES`` among its ``inapplicable`` flags.
"""

from __future__ import annotations

from lklab.pipelines.contract import Inapplicable

__all__ = ["WHOLE_LOG_RULES"]

WHOLE_LOG_RULES = (
    Inapplicable(("--date", "--from", "--to"), ("batch",), "its truth is recomputed from the whole log every time"),
    Inapplicable(
        (
            "--date",
            "--from",
            "--to",
            "--abs-tol",
            "--rel-tol",
            "--max-unexplained",
            "--max-unexplained-events",
            "--json",
            "--json-out",
        ),
        ("reconcile",),
        "its reconciliation compares every output the stream served and prints text; days, money tolerances and the "
        "JSON summary are billing's",
    ),
    Inapplicable(("--history",), ("replay",), "window_history records billing's window rows"),
    Inapplicable(
        ("--allowed-lateness",),
        ("reconcile",),
        "the reconciliation reads what the stream's tables recorded, whatever allowed lateness they ran with",
    ),
    Inapplicable(
        (
            "--events",
            "--seed",
            "--span",
            "--accounts",
            "--duplicate-rate",
            "--malformed-rate",
            "--segment-interval",
            "--overwrite",
        ),
        ("compare",),
        "it compares on the lake's log: write that with 'lklab generate' and these flags first",
    ),
    Inapplicable(("--pipeline",), ("demo",), "the demo runs billing_windows' comparison"),
    Inapplicable(("--pipeline",), ("maintain",), "maintenance serves every pipeline's tables at once"),
)

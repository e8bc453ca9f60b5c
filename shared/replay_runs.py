"""A Kappa replay's run history, ``replay_runs``: what each replay read and what it cost.

One row per completed replay (``lklab.pipelines.billing_windows.replay``), appended once it has written its tables:
its name, the settings it ran with (as a user writes them: ``30s``), how much of the log it
read, and its wall and CPU seconds, next to the batch recompute's ``batch_runs`` so the two
paths' costs can be compared. A replay whose name has no row here never finished.
"""

from __future__ import annotations

import pyarrow as pa

__all__ = ["RUNS_SCHEMA"]

RUNS_SCHEMA = pa.schema(
    {
        "name": pa.string(),
        "recorded_at": pa.timestamp("us", tz="UTC"),
        "windows": pa.string(),  # the window spec, as ``WindowSpec.describe`` says it
        **dict.fromkeys(("watermark_delay", "allowed_lateness", "dedup_horizon"), pa.string()),
        **dict.fromkeys(("segments", "micro_batches", "lines"), pa.int64()),
        "wall_seconds": pa.float64(),
        "cpu_seconds": pa.float64(),
        "cost_scope": pa.string(),
    }
)

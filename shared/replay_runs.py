"""A Kappa replay's run history, ``replay_runs``: what each replay read and what it cost.

One row per completed replay (``lklab.kappa_replay``), appended once it has written its tables:
its name, the settings it ran with (as a user writes them: ``30s``), how much of the log it
read, and its wall and CPU seconds, next to the batch recompute's ``batch_runs`` so the two
paths' costs can be compared. A replay whose name has no row here never finished.
"""

from __future__ import annotations

import pyarrow as pa

__all__ = ["RUNS_SCHEMA"]

RUNS_SCHEMA = pa.schema(
    [
        pa.field("name", pa.string()),
        pa.field("recorded_at", pa.timestamp("us", tz="UTC")),
        pa.field("windows", pa.string()),  # the window spec, as ``WindowSpec.describe`` says it
        pa.field("watermark_delay", pa.string()),
        pa.field("allowed_lateness", pa.string()),
        pa.field("dedup_horizon", pa.string()),
        pa.field("segments", pa.int64()),
        pa.field("micro_batches", pa.int64()),
        pa.field("lines", pa.int64()),
        pa.field("wall_seconds", pa.float64()),
        pa.field("cpu_seconds", pa.float64()),
        pa.field("cost_scope", pa.string()),
    ]
)

"""A Kappa replay through the live runner: the stream's own code over the whole log, once.

``replay_live`` runs a pipeline's ``StreamRule`` (``lklab.live_stream``) over every segment of
the log as one micro-batch, into tables of its own under ``kappa/RUN/`` (``replay_prefix``),
committed by the same sink as the live stream's, with the app id ``replay``. Every rule this
runs is cut-independent (what it decides depends on the log, not on how it is cut into
micro-batches), so the rows are the live stream's, batch ids aside: a replay is the live code
re-run, not a second implementation. Its step runs in the driver, as the live stream's does:
the whole log's parsed lines are held there once, so this serves pipelines whose logs fit a
driver (billing's replay runs on the executors: ``lklab.pipelines.billing_windows.replay``).

One replay of a name at a time (the writer lock ``<app_id>-replay-<RUN>``); a name whose
tables exist is refused (``ReplayExists``) unless ``replace``, which deletes the rule's tables
under the prefix and the replay's checkpoint first.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from pyspark.sql import SparkSession

from lklab.live_stream import LiveStream, StreamRule, run_live
from shared.catalog import replay_prefix
from shared.config import LabConfig
from shared.eventlog import EventLog
from shared.locks import writer
from shared.tables import Tables

__all__ = ["REPLAY_APP", "ReplayExists", "replay_live"]

REPLAY_APP = "replay"


class ReplayExists(FileExistsError):
    """A replay of that name already has tables or a checkpoint."""


def replay_live(
    spark: SparkSession, config: LabConfig, rule: StreamRule, name: str, *, replace: bool = False
) -> LiveStream:
    """Replay the whole log through ``rule`` into ``kappa/<name>/`` (the module docstring)."""
    lake = Path(config.lake).resolve()
    prefix = replay_prefix(name)
    with writer(lake, f"{rule.app_id}-replay-{name}"):
        tables = Tables(spark, lake, config.table_engine)
        state = rule.layout[-1].table.at(prefix)
        checkpoint = lake / "checkpoints" / (prefix + REPLAY_APP)
        if (tables.exists(state) or checkpoint.exists()) and not replace:
            raise ReplayExists(f"replay {name!r} already has {state}; pick another --name or pass --replace")
        for entry in rule.layout:
            shutil.rmtree(tables.path(entry.table.at(prefix)), ignore_errors=True)
        shutil.rmtree(checkpoint, ignore_errors=True)
        segments = EventLog(lake).last_segment()
        if segments == 0:
            raise RuntimeError(f"the log under {lake} is empty: nothing to replay")
        return run_live(
            spark, config, rule, available_now=True, segments_per_batch=segments, app_id=REPLAY_APP, prefix=prefix
        )

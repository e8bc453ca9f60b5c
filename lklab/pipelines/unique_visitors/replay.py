"""The ``unique_visitors`` Kappa replay: the stream's rows for the whole log, under ``kappa/<name>/``.

The stream step is cut-independent (``lklab.pipelines.unique_visitors.step``: the rows served, the members,
the late side output and the duplicates are the same whatever micro-batches the log is cut
into), so the replay runs it once, over the whole log in log order, as a single micro-batch
(``batch_id`` 0), and commits it with the speed layer's own sink (``visitor_sink``, ``lklab.stream_sink``). Its
tables equal a live run's over the same log, batch ids aside.

Cost: the whole log is collected to the driver as Arrow (``parse_page_views`` in Spark, then
``toArrow``) and stepped in one process: memory about the log's parsed size plus its state,
CPU linear in the log. That is fine for the lab's logs (tens of millions of lines need a driver
of several GB); a replay that must scale out would step per user, which the rule allows (every
decision reads one user's state) but this module does not do.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from pyspark.sql import SparkSession

from lklab.pipelines.unique_visitors.parse import PARSED_SCHEMA, parse_page_views
from lklab.pipelines.unique_visitors.speed import (
    batch_rows,
    visitor_settings,
    visitor_sink,
    visitors_table_settings,
)
from lklab.pipelines.unique_visitors.state import VisitorState
from lklab.pipelines.unique_visitors.step import visitors_step
from lklab.pipelines.unique_visitors.tables import VISITORS_SPEED_TABLES
from lklab.replay_runner import ReplayExists
from shared.catalog import replay_prefix
from shared.compute_cost import measure_cost
from shared.config import LabConfig
from shared.eventlog import EventLog
from shared.locks import writer
from shared.log_source import raw_log
from shared.tables import Tables

__all__ = ["APP_ID", "ReplayExists", "VisitorsReplayRun", "run_visitors_replay"]

APP_ID = "visitors-replay"


@dataclass(frozen=True)
class VisitorsReplayRun:
    name: str
    segments: int
    lines: int
    wall_seconds: float
    cpu_seconds: float
    cost_scope: str


def run_visitors_replay(
    spark: SparkSession, config: LabConfig, name: str, *, replace: bool = False
) -> VisitorsReplayRun:
    """Replay the whole log into ``kappa/<name>/visitors_*`` with ``config``'s stream settings.

    A replay of that name that exists is refused (``ReplayExists``) unless ``replace``; one
    process at a time per name (``LockHeld``)."""
    lake = Path(config.lake).resolve()
    prefix = replay_prefix(name)
    with writer(lake, f"visitors-replay-{name}"):
        tables = Tables(spark, lake, config.table_engine)
        owned = [tables.path(table.at(prefix)) for table in VISITORS_SPEED_TABLES]
        if any(path.exists() for path in owned):
            # without its state (the commit point) the replay never finished: it starts over
            if tables.exists(VISITORS_SPEED_TABLES[-1].at(prefix)) and not replace:
                raise ReplayExists(
                    f"replay {name!r} already has unique_visitors tables under {tables.root / prefix}; "
                    "pick another --name or pass --replace"
                )
            for path in owned:
                shutil.rmtree(path, ignore_errors=True)
        segments = EventLog(lake).last_segment()
        if segments == 0:
            raise RuntimeError(f"the log under {lake} is empty: run 'lklab generate --pipeline unique_visitors' first")
        with measure_cost(config.spark_master) as cost:
            raw = raw_log(spark, str(lake), segments, max_line_bytes=config.max_line_bytes)
            parsed = raw.transform(parse_page_views, max_clock_skew=config.max_clock_skew).toArrow()
            parsed = parsed.select(PARSED_SCHEMA.names).cast(PARSED_SCHEMA)
            step = visitors_step(parsed, VisitorState.empty(), visitor_settings(config), 0)
            sink = visitor_sink(tables, prefix, APP_ID, visitors_table_settings(config))
            try:
                sink.commit(0, batch_rows(0, parsed, step))
            finally:
                sink.close()
        return VisitorsReplayRun(name, segments, parsed.num_rows, cost.wall_seconds, cost.cpu_seconds, cost.scope)

"""The lake's tables: every table's name, row schema and the run-prefix rule, in one place.

A lake holds its Delta tables under ``tables_root(lake)``, ``<lake>/tables/<name>``. The
always-on speed layer writes the stream tables under their bare names; a Kappa replay named
``RUN`` writes the same tables under the prefix ``kappa/RUN/`` (``replay_prefix``), so replays
never touch the live layer's rows. The batch recompute, the reconciliation and the run
histories have one table each.

Every table has its row schema here: ``Table.schema`` (Arrow) and ``Table.spark_schema``. An
entry names the module that defines the schema beside the code that builds the rows
(``"module:NAME"``) and imports it only when asked, so naming a table (a DAG does, when it is
parsed) imports neither Arrow nor Spark. ``empty`` gives a table's rows before it exists. No
table is partitioned: a day's rows are replaced by a predicate on ``window_start``, not a
partition. No other module spells a table's name: it names the ``Table`` here
(``BATCH_TRUTH.name``, ``SPEED_AGGREGATES.at(prefix)``).
"""

from __future__ import annotations

import importlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

__all__ = [
    "Table",
    "tables_root",
    "LATENCY_COLUMNS",
    "REPLAY_ROOT",
    "replay_prefix",
    "replay_name",
    "stream_prefix",
    "StreamChoiceError",
    "DEAD_LETTER",
    "DUPLICATE_EVENTS",
    "LATE_EVENTS",
    "SPEED_AGGREGATES",
    "STREAM_METRICS",
    "STREAM_STATE",
    "WINDOW_HISTORY",
    "SPEED_TABLES",
    "STREAM_OUTPUTS",
    "BATCH_TRUTH",
    "BATCH_DEAD_LETTER",
    "BATCH_DUPLICATES",
    "BATCH_RUNS",
    "BATCH_EVENTS",
    "BATCH_TABLES",
    "REPLAY_RUNS",
    "GENERATOR_TRUTH",
]


def tables_root(lake: str | Path) -> Path:
    """Where ``lake`` keeps its tables: ``<lake>/tables``, resolved."""
    return Path(lake).resolve() / "tables"


@dataclass(frozen=True)
class Table:
    """One table of the lake: ``name`` under ``tables_root``; ``rows``: where the Arrow schema
    of its rows is defined (``"module:NAME"``, with ``without`` columns dropped), imported when
    asked for. ``added``: columns of the schema added after tables were first written with it;
    a table written before takes them on at its next append, its older rows null there."""

    name: str
    rows: str
    without: tuple[str, ...] = ()
    added: tuple[str, ...] = ()

    @property
    def schema(self) -> pa.Schema:
        module, attribute = self.rows.split(":")
        schema = getattr(importlib.import_module(module), attribute)
        for column in self.without:
            schema = schema.remove(schema.get_field_index(column))
        return schema

    def at(self, prefix: str = "") -> str:
        """The table's name under a run prefix (``""``: the speed layer's; ``kappa/RUN/``)."""
        return f"{prefix}{self.name}"

    @property
    def spark_schema(self) -> StructType:
        from pyspark.sql.pandas.types import from_arrow_schema

        return from_arrow_schema(self.schema)

    def empty(self, spark: SparkSession) -> DataFrame:
        """No rows, with the table's columns (what reading it gives before it is written)."""
        return spark.createDataFrame([], self.spark_schema)


# The columns the live runner sets on every stream's metrics row (``shared.live_latency``): added
# after the first lakes were written, so every metrics table lists them as ``added``. The two
# timestamps are UTC, the rest seconds.
LATENCY_COLUMNS = ("committed_at", "latency_p50_seconds", "latency_p95_seconds", "latency_max_seconds", "started_at")

# The stream's tables: written by the always-on speed layer (no prefix) and by each replay.
DEAD_LETTER = Table("dead_letter", "shared.speed:DEAD_LETTER_SCHEMA")
DUPLICATE_EVENTS = Table("duplicate_events", "shared.speed:DUPLICATE_SCHEMA")
LATE_EVENTS = Table("late_events", "shared.stream_windows:LATE_SCHEMA")
SPEED_AGGREGATES = Table("speed_aggregates", "shared.stream_windows:WINDOW_ROW_SCHEMA")
STREAM_METRICS = Table("stream_metrics", "shared.stream_metrics:METRICS_SCHEMA", added=LATENCY_COLUMNS)
STREAM_STATE = Table("stream_state", "shared.stream_state:STATE_SCHEMA")
WINDOW_HISTORY = Table("window_history", "shared.stream_windows:HISTORY_SCHEMA")  # a replay's, on request
SPEED_TABLES = (DEAD_LETTER, DUPLICATE_EVENTS, LATE_EVENTS, SPEED_AGGREGATES, STREAM_METRICS, STREAM_STATE)
# What a reconciliation reads of a stream (the state is its own commit point, not an output).
STREAM_OUTPUTS = (SPEED_AGGREGATES, LATE_EVENTS, DUPLICATE_EVENTS, DEAD_LETTER, STREAM_METRICS)

# The batch recompute's.
BATCH_TRUTH = Table("batch_truth", "shared.aggregation:AGGREGATE_ARROW_SCHEMA")
BATCH_DEAD_LETTER = Table("batch_dead_letter", "shared.speed:DEAD_LETTER_SCHEMA", without=("batch_id",))
BATCH_DUPLICATES = Table("batch_duplicates", "shared.speed:DUPLICATE_SCHEMA", without=("batch_id",))
BATCH_RUNS = Table("batch_runs", "shared.batch_runs:RUNS_SCHEMA")
# Each event_id's first copy among the segments the batch has read: what a recompute of one day
# needs of the log before the segments it reads (``lklab.pipelines.billing_windows.batch``).
BATCH_EVENTS = Table("batch_events", "shared.events:EVENT_SCHEMA")
BATCH_TABLES = (BATCH_TRUTH, BATCH_DUPLICATES, BATCH_DEAD_LETTER, BATCH_RUNS)
# The generator's ground truth of the batch's windows, computed without Spark (``lklab.pipelines.billing_windows.truth``).
GENERATOR_TRUTH = Table("generator_truth", "shared.aggregation:AGGREGATE_ARROW_SCHEMA")

REPLAY_RUNS = Table("replay_runs", "shared.replay_runs:RUNS_SCHEMA")  # a Kappa replay's cost, one row per run

REPLAY_ROOT = "kappa/"
_RUN_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


class StreamChoiceError(ValueError):
    """A stream named in a way that names no stream (``--against``)."""


def replay_prefix(name: str) -> str:
    """Table-name prefix of replay ``name`` (``kappa/<name>/``); rejects unusable names."""
    if not _RUN_NAME.match(name or ""):
        raise ValueError(f"replay name {name!r}: use letters, digits, '.', '_' or '-', starting with a letter or digit")
    return f"{REPLAY_ROOT}{name}/"


def replay_name(prefix: str) -> str | None:
    """The replay whose prefix this is (None: the speed layer's, no prefix)."""
    return prefix[len(REPLAY_ROOT) : -1] if prefix.startswith(REPLAY_ROOT) else None


def stream_prefix(against: str) -> str:
    """``speed`` -> ``""``; ``kappa:<RUN>`` -> ``kappa/<RUN>/``."""
    if against == "speed":
        return ""
    if against.startswith("kappa:"):
        return replay_prefix(against.split(":", 1)[1])
    raise StreamChoiceError(f"--against {against!r}: use 'speed' or 'kappa:<RUN>'")

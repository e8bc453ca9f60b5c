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
    "BATCH_TABLES",
    "CORRECTED_AGGREGATES",
    "RECON_RUNS",
    "RECON_DIFFS",
    "RECON_CORRECTIONS",
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
    asked for."""

    name: str
    rows: str
    without: tuple[str, ...] = ()

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


# The stream's tables: written by the always-on speed layer (no prefix) and by each replay.
DEAD_LETTER = Table("dead_letter", "shared.speed:DEAD_LETTER_SCHEMA")
DUPLICATE_EVENTS = Table("duplicate_events", "shared.speed:DUPLICATE_SCHEMA")
LATE_EVENTS = Table("late_events", "shared.stream_windows:LATE_SCHEMA")
SPEED_AGGREGATES = Table("speed_aggregates", "shared.stream_windows:WINDOW_ROW_SCHEMA")
STREAM_METRICS = Table("stream_metrics", "shared.stream_metrics:METRICS_SCHEMA")
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
BATCH_TABLES = (BATCH_TRUTH, BATCH_DUPLICATES, BATCH_DEAD_LETTER, BATCH_RUNS)
# The generator's ground truth of the batch's windows, computed without Spark (``lklab.truth``).
GENERATOR_TRUTH = Table("generator_truth", "shared.aggregation:AGGREGATE_ARROW_SCHEMA")

# The reconciliation's (``corrected_aggregates`` is per stream: under the stream's prefix). Its
# rows are the reconciliation's results: their schemas are defined with them.
CORRECTED_AGGREGATES = Table("corrected_aggregates", "reconciliation.recon_tables:CORRECTED_SCHEMA")
RECON_RUNS = Table("recon_runs", "reconciliation.recon_tables:RUNS_SCHEMA")
RECON_DIFFS = Table("recon_diffs", "reconciliation.recon_tables:DIFFS_SCHEMA")
RECON_CORRECTIONS = Table("recon_corrections", "reconciliation.recon_tables:CORRECTIONS_SCHEMA")

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


# ----------------------------------------------------------------------------- unique_visitors
# The second pipeline's tables (distinct URLs per user per window; ``shared.visitors_stream``).
# Its stream writes them under the same run prefixes as the billing stream's.

VISITORS_WINDOWS = Table(
    "visitors_windows", "shared.visitors_stream:VISITOR_WINDOW_SCHEMA"
)  # one current row per (window, user)
VISITORS_MEMBERS = Table(
    "visitors_members", "shared.visitors_stream:VISITOR_MEMBER_SCHEMA"
)  # the URLs each window counted
VISITORS_LATE_EVENTS = Table(
    "visitors_late_events", "shared.visitors_stream:VISITOR_LATE_SCHEMA"
)  # the side output, with adds_url
VISITORS_DUPLICATES = Table("visitors_duplicates", "shared.visitors_stream:VISITOR_DUPLICATE_SCHEMA")
VISITORS_DEAD_LETTER = Table("visitors_dead_letter", "shared.speed:DEAD_LETTER_SCHEMA")
VISITORS_STATE = Table(
    "visitors_state", "shared.visitor_state:STATE_SCHEMA"
)  # clock, remembered ids, member entries (TTL)
VISITORS_STREAM_TABLES = (
    VISITORS_WINDOWS,
    VISITORS_MEMBERS,
    VISITORS_LATE_EVENTS,
    VISITORS_DUPLICATES,
    VISITORS_DEAD_LETTER,
    VISITORS_STATE,
)
VISITORS_TRUTH = Table("visitors_truth", "shared.distinct_urls:COUNT_SCHEMA")  # the batch rule over the whole log
VISITORS_CORRECTED = Table(
    "visitors_corrected", "reconciliation.distinct_reconcile:CORRECTED_SCHEMA"
)  # per stream: served, corrected, truth and verdict per window
# Per micro-batch: the segments read and where the lines went (a reconciliation's read-through).
VISITORS_STREAM_METRICS = Table("visitors_stream_metrics", "shared.visitor_metrics:VISITOR_METRICS_SCHEMA")
# Each user's URLs seen within the state TTL, as of the last micro-batch (rewritten every batch).
VISITORS_SEEN = Table("visitors_seen", "shared.visitor_state:SEEN_TABLE_SCHEMA")
# What a stream job writes: its outputs, then the state (the commit point) last.
VISITORS_SPEED_TABLES = (*VISITORS_STREAM_TABLES[:-1], VISITORS_STREAM_METRICS, VISITORS_SEEN, VISITORS_STATE)
# The batch's: the truth's members (with the first line of each) and its line-level results.
VISITORS_TRUTH_MEMBERS = Table("visitors_truth_members", "shared.distinct_urls:MEMBER_SCHEMA")
VISITORS_BATCH_DUPLICATES = Table(
    "visitors_batch_duplicates", "shared.visitors_stream:VISITOR_DUPLICATE_SCHEMA", without=("batch_id",)
)
VISITORS_BATCH_DEAD_LETTER = Table(
    "visitors_batch_dead_letter", "shared.speed:DEAD_LETTER_SCHEMA", without=("batch_id",)
)
VISITORS_BATCH_TABLES = (VISITORS_TRUTH, VISITORS_TRUTH_MEMBERS, VISITORS_BATCH_DUPLICATES, VISITORS_BATCH_DEAD_LETTER)
__all__ += [
    "VISITORS_WINDOWS",
    "VISITORS_MEMBERS",
    "VISITORS_LATE_EVENTS",
    "VISITORS_DUPLICATES",
    "VISITORS_DEAD_LETTER",
    "VISITORS_STATE",
    "VISITORS_STREAM_TABLES",
    "VISITORS_TRUTH",
    "VISITORS_CORRECTED",
    "VISITORS_STREAM_METRICS",
    "VISITORS_SEEN",
    "VISITORS_SPEED_TABLES",
    "VISITORS_TRUTH_MEMBERS",
    "VISITORS_BATCH_DUPLICATES",
    "VISITORS_BATCH_DEAD_LETTER",
    "VISITORS_BATCH_TABLES",
]


# ----------------------------------------------------------------------------- order_payments
# The order-payment interval join (``shared.interval_join``): its stream tables (under a run
# prefix like the others), its batch truth, and the stream's one-table state.

PAYMENTS_MATCHED = Table("payments_matched", "shared.interval_join:MATCHED_SCHEMA")
PAYMENTS_UNPAID = Table("payments_unpaid", "shared.interval_join:UNPAID_SCHEMA")
PAYMENTS_ORPHANS = Table("payments_orphans", "shared.interval_join:ORPHAN_SCHEMA")
PAYMENTS_LATE_EVENTS = Table("payments_late_events", "shared.interval_join:LATE_JOIN_SCHEMA")
PAYMENTS_DUPLICATES = Table("payments_duplicates", "shared.interval_join:JOIN_DUPLICATE_SCHEMA")
PAYMENTS_DEAD_LETTER = Table("payments_dead_letter", "shared.speed:DEAD_LETTER_SCHEMA")
PAYMENTS_METRICS = Table("payments_stream_metrics", "shared.join_metrics:JOIN_METRICS_SCHEMA")
PAYMENTS_STATE = Table("payments_state", "shared.join_state:JOIN_STATE_SCHEMA")
PAYMENTS_TABLES = (
    PAYMENTS_MATCHED,
    PAYMENTS_UNPAID,
    PAYMENTS_ORPHANS,
    PAYMENTS_LATE_EVENTS,
    PAYMENTS_DUPLICATES,
    PAYMENTS_DEAD_LETTER,
    PAYMENTS_METRICS,
    PAYMENTS_STATE,
)
PAYMENTS_OUTPUTS = PAYMENTS_TABLES[:-1]  # what a reconciliation reads (the state is the commit point)

PAYMENTS_TRUTH_MATCHED = Table("payments_truth_matched", "shared.interval_join:MATCH_SCHEMA")
PAYMENTS_TRUTH_UNPAID = Table("payments_truth_unpaid", "shared.order_events:ORDER_EVENT_SCHEMA")
PAYMENTS_TRUTH_ORPHANS = Table("payments_truth_orphans", "shared.order_events:ORDER_EVENT_SCHEMA")
PAYMENTS_BATCH_DUPLICATES = Table(
    "payments_batch_duplicates", "shared.interval_join:JOIN_DUPLICATE_SCHEMA", without=("batch_id",)
)
PAYMENTS_BATCH_DEAD_LETTER = Table(
    "payments_batch_dead_letter", "shared.speed:DEAD_LETTER_SCHEMA", without=("batch_id",)
)
PAYMENTS_BATCH_TABLES = (
    PAYMENTS_TRUTH_MATCHED,
    PAYMENTS_TRUTH_UNPAID,
    PAYMENTS_TRUTH_ORPHANS,
    PAYMENTS_BATCH_DUPLICATES,
    PAYMENTS_BATCH_DEAD_LETTER,
)

__all__ += [
    "PAYMENTS_MATCHED",
    "PAYMENTS_UNPAID",
    "PAYMENTS_ORPHANS",
    "PAYMENTS_LATE_EVENTS",
    "PAYMENTS_DUPLICATES",
    "PAYMENTS_DEAD_LETTER",
    "PAYMENTS_METRICS",
    "PAYMENTS_STATE",
    "PAYMENTS_TABLES",
    "PAYMENTS_OUTPUTS",
    "PAYMENTS_TRUTH_MATCHED",
    "PAYMENTS_TRUTH_UNPAID",
    "PAYMENTS_TRUTH_ORPHANS",
    "PAYMENTS_BATCH_DUPLICATES",
    "PAYMENTS_BATCH_DEAD_LETTER",
    "PAYMENTS_BATCH_TABLES",
]

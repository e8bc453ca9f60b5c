"""The lake's tables: every table's name, row schema and the run-prefix rule, in one place.

A lake holds its Delta tables under ``<lake>/tables/<name>``. The always-on speed layer writes
the stream tables under their bare names; a Kappa replay named ``RUN`` writes the same tables
under the prefix ``kappa/RUN/`` (``replay_prefix``), so replays never touch the live layer's
rows. The batch recompute, the reconciliation and the run histories have one table each.

``Table.schema`` is the Arrow schema of the rows where the lab fixes it: the stream's tables
(written from Arrow), the batch's line tables (the same rows without the micro-batch) and the
corrected windows; the other tables take their columns from the Spark computation that writes
them, and ``schema`` is None for them. ``empty`` gives a table's rows before it exists. No other
module spells a table's name: it names the ``Table`` here (``BATCH_TRUTH.name``,
``SPEED_AGGREGATES.at(prefix)``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.pandas.types import from_arrow_schema

from shared.aggregation import AGGREGATE_ARROW_SCHEMA
from shared.speed import DEAD_LETTER_SCHEMA, DUPLICATE_SCHEMA
from shared.stream_metrics import METRICS_SCHEMA
from shared.stream_state import STATE_SCHEMA
from shared.stream_windows import HISTORY_SCHEMA, LATE_SCHEMA, WINDOW_ROW_SCHEMA

__all__ = [
    "Table", "REPLAY_ROOT", "replay_prefix", "stream_prefix", "StreamChoiceError",
    "DEAD_LETTER", "DUPLICATE_EVENTS", "LATE_EVENTS", "SPEED_AGGREGATES", "STREAM_METRICS", "STREAM_STATE",
    "WINDOW_HISTORY", "SPEED_TABLES", "STREAM_OUTPUTS",
    "BATCH_TRUTH", "BATCH_DEAD_LETTER", "BATCH_DUPLICATES", "BATCH_RUNS", "BATCH_TABLES",
    "CORRECTED_AGGREGATES", "RECON_RUNS", "RECON_DIFFS", "RECON_CORRECTIONS", "REPLAY_RUNS",
]


@dataclass(frozen=True)
class Table:
    """One table of the lake: ``name`` under ``<lake>/tables``; ``schema`` (Arrow) when the lab
    writes its rows from Arrow, None when Spark gives them their shape."""

    name: str
    schema: pa.Schema | None = None

    def at(self, prefix: str = "") -> str:
        """The table's name under a run prefix (``""``: the speed layer's; ``kappa/RUN/``)."""
        return f"{prefix}{self.name}"

    def empty(self, spark: SparkSession) -> DataFrame:
        """No rows, with the table's columns (what reading it gives before it is written)."""
        if self.schema is None:
            raise ValueError(f"{self.name} takes its columns from the computation that writes it")
        return spark.createDataFrame([], from_arrow_schema(self.schema))


def _without_batch(schema: pa.Schema) -> pa.Schema:
    return schema.remove(schema.get_field_index("batch_id"))


# The stream's tables: written by the always-on speed layer (no prefix) and by each replay.
DEAD_LETTER = Table("dead_letter", DEAD_LETTER_SCHEMA)
DUPLICATE_EVENTS = Table("duplicate_events", DUPLICATE_SCHEMA)
LATE_EVENTS = Table("late_events", LATE_SCHEMA)
SPEED_AGGREGATES = Table("speed_aggregates", WINDOW_ROW_SCHEMA)
STREAM_METRICS = Table("stream_metrics", METRICS_SCHEMA)
STREAM_STATE = Table("stream_state", STATE_SCHEMA)
WINDOW_HISTORY = Table("window_history", HISTORY_SCHEMA)  # a replay's, on request
SPEED_TABLES = (DEAD_LETTER, DUPLICATE_EVENTS, LATE_EVENTS, SPEED_AGGREGATES, STREAM_METRICS, STREAM_STATE)
# What a reconciliation reads of a stream (the state is its own commit point, not an output).
STREAM_OUTPUTS = (SPEED_AGGREGATES, LATE_EVENTS, DUPLICATE_EVENTS, DEAD_LETTER, STREAM_METRICS)

# The batch recompute's.
BATCH_TRUTH = Table("batch_truth")
BATCH_DEAD_LETTER = Table("batch_dead_letter", _without_batch(DEAD_LETTER_SCHEMA))
BATCH_DUPLICATES = Table("batch_duplicates", _without_batch(DUPLICATE_SCHEMA))
BATCH_RUNS = Table("batch_runs")
BATCH_TABLES = (BATCH_TRUTH, BATCH_DUPLICATES, BATCH_DEAD_LETTER, BATCH_RUNS)

# The reconciliation's (``corrected_aggregates`` is per stream: under the stream's prefix).
CORRECTED_AGGREGATES = Table("corrected_aggregates", AGGREGATE_ARROW_SCHEMA)
RECON_RUNS = Table("recon_runs")
RECON_DIFFS = Table("recon_diffs")
RECON_CORRECTIONS = Table("recon_corrections")

REPLAY_RUNS = Table("replay_runs")

REPLAY_ROOT = "kappa/"
_RUN_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


class StreamChoiceError(ValueError):
    """A stream named in a way that names no stream (``--against``)."""


def replay_prefix(name: str) -> str:
    """Table-name prefix of replay ``name`` (``kappa/<name>/``); rejects unusable names."""
    if not _RUN_NAME.match(name or ""):
        raise ValueError(
            f"replay name {name!r}: use letters, digits, '.', '_' or '-', starting with a letter or digit"
        )
    return f"{REPLAY_ROOT}{name}/"


def replay_name(prefix: str) -> str | None:
    """The replay whose prefix this is (None: the speed layer's, no prefix)."""
    return prefix[len(REPLAY_ROOT):-1] if prefix.startswith(REPLAY_ROOT) else None


def stream_prefix(against: str) -> str:
    """``speed`` -> ``""``; ``kappa:<RUN>`` -> ``kappa/<RUN>/``."""
    if against == "speed":
        return ""
    if against.startswith("kappa:"):
        return replay_prefix(against.split(":", 1)[1])
    raise StreamChoiceError(f"--against {against!r}: use 'speed' or 'kappa:<RUN>'")


# ----------------------------------------------------------------------------- order_payments
# The order-payment interval join (``shared.interval_join``): its stream tables (under a run
# prefix like the others), its batch truth, and the stream's one-table state.
from shared.interval_join import (  # noqa: E402  (kept with the pipeline's block)
    JOIN_DUPLICATE_SCHEMA,
    LATE_JOIN_SCHEMA,
    MATCH_SCHEMA,
    MATCHED_SCHEMA,
    ORPHAN_SCHEMA,
    UNPAID_SCHEMA,
)
from shared.join_state import JOIN_STATE_SCHEMA  # noqa: E402
from shared.order_events import ORDER_EVENT_SCHEMA  # noqa: E402

PAYMENTS_MATCHED = Table("payments_matched", MATCHED_SCHEMA)
PAYMENTS_UNPAID = Table("payments_unpaid", UNPAID_SCHEMA)
PAYMENTS_ORPHANS = Table("payments_orphans", ORPHAN_SCHEMA)
PAYMENTS_LATE_EVENTS = Table("payments_late_events", LATE_JOIN_SCHEMA)
PAYMENTS_DUPLICATES = Table("payments_duplicates", JOIN_DUPLICATE_SCHEMA)
PAYMENTS_DEAD_LETTER = Table("payments_dead_letter", DEAD_LETTER_SCHEMA)
PAYMENTS_STATE = Table("payments_state", JOIN_STATE_SCHEMA)
PAYMENTS_TABLES = (
    PAYMENTS_MATCHED, PAYMENTS_UNPAID, PAYMENTS_ORPHANS, PAYMENTS_LATE_EVENTS, PAYMENTS_DUPLICATES, PAYMENTS_DEAD_LETTER, PAYMENTS_STATE,
)
PAYMENTS_OUTPUTS = PAYMENTS_TABLES[:-1]  # what a reconciliation reads (the state is the commit point)

PAYMENTS_TRUTH_MATCHED = Table("payments_truth_matched", MATCH_SCHEMA)
PAYMENTS_TRUTH_UNPAID = Table("payments_truth_unpaid", ORDER_EVENT_SCHEMA)
PAYMENTS_TRUTH_ORPHANS = Table("payments_truth_orphans", ORDER_EVENT_SCHEMA)
PAYMENTS_BATCH_DUPLICATES = Table("payments_batch_duplicates", _without_batch(JOIN_DUPLICATE_SCHEMA))
PAYMENTS_BATCH_DEAD_LETTER = Table("payments_batch_dead_letter", _without_batch(DEAD_LETTER_SCHEMA))
PAYMENTS_BATCH_TABLES = (
    PAYMENTS_TRUTH_MATCHED, PAYMENTS_TRUTH_UNPAID, PAYMENTS_TRUTH_ORPHANS, PAYMENTS_BATCH_DUPLICATES, PAYMENTS_BATCH_DEAD_LETTER,
)

__all__ += [
    "PAYMENTS_MATCHED", "PAYMENTS_UNPAID", "PAYMENTS_ORPHANS", "PAYMENTS_LATE_EVENTS", "PAYMENTS_DUPLICATES",
    "PAYMENTS_DEAD_LETTER", "PAYMENTS_STATE", "PAYMENTS_TABLES", "PAYMENTS_OUTPUTS", "PAYMENTS_TRUTH_MATCHED",
    "PAYMENTS_TRUTH_UNPAID", "PAYMENTS_TRUTH_ORPHANS", "PAYMENTS_BATCH_DUPLICATES", "PAYMENTS_BATCH_DEAD_LETTER",
    "PAYMENTS_BATCH_TABLES",
]

"""Reconcile a declared pipeline's stream (the live one or a replay) with its batch truth.

Both sides are read at one moment by the reconcile runner (``lklab.reconcile_runner``): the
stream's tables at its last completed micro-batch, the truth under its batch lock. The diff is
the keyed diff of every pipeline with one row per key on ``(window_start, window_end, keys)``
with the measures ``event_count`` and each declared measure, exact, by checksums
(``reconciliation.range_diff``): only the windows whose checksums differ are joined.

The truth counts every first copy; the stream counts the ones its windows took and sends each
(event, window) it judged late to ``NAME_late``. A differing window is **explained by late
events** when folding the late side output back into the stream gives the truth exactly, count
and every sum, **explained by unread segments** when the stream has not read the whole of what
the truth read and some event of the window lies beyond what it read, and **unexplained**
otherwise (an id forgotten past the dedup horizon and counted twice, say): exit 3 from
``lklab reconcile``. How the late rows fold back depends on the windows:

* **fixed windows**: a window differs by exactly its late rows, ``truth = stream + late``
  (a side without the window holds zero);
* **sessions**: the bounds may differ too. A late event the stream refused may have bridged two
  of its sessions, which the truth holds as one; the stream then holds two sessions the truth
  lacks (``extra_in_stream``) and the truth one the stream lacks (``missing_in_stream``). As for
  billing (``reconciliation.fold``), each late event is folded back as the session it forms
  alone, ``[t, t + gap)``, and, per keys, the stream's sessions and these are merged where they
  overlap (``SessionWindows.merged``) and summed: the corrected sessions. A differing window of
  either side is explained by late events when it lies inside a corrected session equal to the
  truth's session of the same bounds, count and every sum. (The fold also merges two sessions
  the stream itself holds overlapping: one final before an on-time event overlapped it.)
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from functools import reduce

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from lklab.pipelines.declared.declaration import Declaration
from lklab.pipelines.declared.parse import parse_declared
from lklab.pipelines.declared.stream import stream_rule
from lklab.pipelines.declared.tables import tables_of, window_schema
from lklab.pipelines.declared.truth import batch_app_of, spark_type
from lklab.reconcile_runner import ReconcileRule, Sides, reconcile_stream
from reconciliation.keyed_diff import keyed_diff
from reconciliation.range_diff import range_diff
from shared.log_source import raw_log

__all__ = ["DeclaredReconciliation", "reconcile_rule", "reconcile_declared", "render_text"]

_SHOWN = 20  # unexplained windows named in the text


@dataclass(frozen=True)
class DeclaredReconciliation:
    """What the diff found: ``statuses`` (windows per status), the segments each side read, the
    totals of each measure (``event_count`` first) on each side and in the late side output, the
    differing windows explained by late events and by unread segments, and the ``unexplained``
    ones (each described, at most ``_SHOWN``; ``unexplained_count``: all of them)."""

    pipeline: str
    against: str
    statuses: dict[str, int]
    truth_last_segment: int
    stream_last_segment: int
    truth_totals: dict[str, int | Decimal]
    stream_totals: dict[str, int | Decimal]
    late_totals: dict[str, int | Decimal]
    explained_late: int
    explained_unread: int
    unexplained_count: int
    unexplained: tuple[str, ...]


def _totals(frame, measures: list[str]) -> dict:
    row = frame.agg(*(F.sum(m).alias(m) for m in measures)).first()
    return {m: row[m] or 0 for m in measures}


def _compare(d: Declaration, sides: Sides) -> DeclaredReconciliation:
    t = tables_of(d)
    keys = ["window_start", "window_end", *d.keys]
    measures = ["event_count", *(m.name for m in d.measures)]
    truth = sides.truth_frame(t.truth)
    stream = sides.stream_frame(t.windows).select(*window_schema(d).names)
    late_rows = sides.stream_frame(t.late)
    # only the differing windows are read after the counts: the ones whose checksums agree are not joined
    ranged = range_diff(truth, stream, keys, measures)
    diff = ranged.differing.persist()
    statuses = ranged.status_counts()
    folded = d.window.pick(fixed=_fixed_fold, merging=_session_fold)
    differing = folded(d, diff.where("status != 'match'"), truth, stream, late_rows)
    unread = None
    if sides.read_through < sides.truth_segment:
        lines = raw_log(sides.spark, str(sides.lake), sides.truth_segment, first_segment=sides.read_through + 1)
        events = parse_declared(lines, d).where("reject_reason IS NULL AND NOT heartbeat")
        touched = d.window.pick(fixed=_fixed_unread, merging=_session_unread)(d, events, differing)
        unread = {tuple(r) for r in touched.select(*keys).distinct().collect()}
    explained_late = explained_unread = 0
    unexplained = []
    for row in differing.collect():
        gap = {m: (row[f"truth_{m}"] or 0) - (row[f"stream_{m}"] or 0) for m in measures}
        if row["late_explains"]:
            explained_late += 1
        elif unread is not None and tuple(row[k] for k in keys) in unread:
            explained_unread += 1
        else:
            window = f"[{row['window_start']:%Y-%m-%dT%H:%M:%S}, {row['window_end']:%H:%M:%S})"
            named = ", ".join(f"{k}={row[k]}" for k in d.keys)
            gaps = ", ".join(f"{m} {gap[m] - (row[f'late_{m}'] or 0)}" for m in measures)
            unexplained.append(f"{window} {named}: {row['status']}, not explained by late events: {gaps}")
    diff.unpersist()
    return DeclaredReconciliation(
        pipeline=d.name,
        against=sides.against,
        statuses=statuses,
        truth_last_segment=sides.truth_segment,
        stream_last_segment=sides.read_through,
        truth_totals=_totals(truth, measures),
        stream_totals=_totals(stream, measures),
        late_totals={m: v for m, v in zip(measures, _late_totals(late_rows, d).values())},
        explained_late=explained_late,
        explained_unread=explained_unread,
        unexplained_count=len(unexplained),
        unexplained=tuple(sorted(unexplained)[:_SHOWN]),
    )


def _late_sums(d: Declaration, late_rows: DataFrame, keys: list[str]) -> DataFrame:
    return late_rows.groupBy(*keys).agg(
        F.count(F.lit(1)).alias("late_event_count"), *(F.sum(m.name).alias(f"late_{m.name}") for m in d.measures)
    )


def _fixed_fold(d: Declaration, differing: DataFrame, truth, stream, late_rows: DataFrame) -> DataFrame:
    """Differing windows with their late rows' figures (``late_<m>``) and ``late_explains``:
    ``truth - stream = late`` for every measure."""
    keys = ["window_start", "window_end", *d.keys]
    measures = ["event_count", *(m.name for m in d.measures)]
    zero = F.lit(0)
    explains = reduce(
        lambda a, b: a & b,
        (
            (F.coalesce(f"truth_{m}", zero) - F.coalesce(f"stream_{m}", zero)) == F.coalesce(f"late_{m}", zero)
            for m in measures
        ),
    )
    return differing.join(_late_sums(d, late_rows, keys), keys, "left").withColumn("late_explains", explains)


def _session_fold(d: Declaration, differing: DataFrame, truth, stream: DataFrame, late_rows: DataFrame) -> DataFrame:
    """Differing windows with ``late_explains``: inside a corrected session (the module
    docstring) equal to the truth's; ``late_<m>``: the late events folded into that session."""
    keys = ["window_start", "window_end", *d.keys]
    measures = ["event_count", *(m.name for m in d.measures)]
    sums = {m.name: m for m in d.measures}
    served = stream.select(
        *keys, *measures, F.lit(0).cast("long").alias("late_event_count"), *(F.lit(0).alias(f"late_{m}") for m in sums)
    )
    folded = d.window.late_windows(late_rows).select(
        *keys,
        F.lit(1).cast("long").alias("event_count"),
        *(F.col(m) for m in sums),
        F.lit(1).cast("long").alias("late_event_count"),
        *(F.col(m).alias(f"late_{m}") for m in sums),
    )
    late_measures = ["late_event_count", *(f"late_{m}" for m in sums)]
    corrected = (
        d.window.merged(served.unionByName(folded), keys=d.keys)
        .groupBy(*keys)
        .agg(*(F.sum(m).alias(m) for m in (*measures, *late_measures)))
        .select(
            *keys,
            "event_count",
            *(F.col(m).cast(spark_type(sums[m])).alias(m) for m in sums),
            *late_measures,
        )
    )
    checked = keyed_diff(truth, corrected.select(*keys, *measures), keys, measures).where(
        "status != 'missing_in_stream'"
    )
    sessions = corrected.join(checked.select(*keys, (F.col("status") == "match").alias("late_explains")), keys).select(
        *(F.col(k).alias(f"_key_{i}") for i, k in enumerate(d.keys)),
        F.col("window_start").alias("_start"),
        F.col("window_end").alias("_end"),
        "late_explains",
        *late_measures,
    )
    inside = [F.col(k) == F.col(f"_key_{i}") for i, k in enumerate(d.keys)] + [
        F.col("window_start") >= F.col("_start"),
        F.col("window_end") <= F.col("_end"),
    ]
    return (
        differing.join(sessions, reduce(lambda a, b: a & b, inside), "left")
        .drop(*(f"_key_{i}" for i in range(len(d.keys))), "_start", "_end")
        .fillna(False, ["late_explains"])
    )


def _fixed_unread(d: Declaration, events: DataFrame, differing: DataFrame) -> DataFrame:
    """The windows the unread events fall in."""
    return d.window.assign_frame(events)


def _session_unread(d: Declaration, events: DataFrame, differing: DataFrame) -> DataFrame:
    """The differing windows an unread event of their keys overlaps with its own ``[t, t + gap)``."""
    t = F.unix_micros(events["event_time"])
    overlaps = [differing[k] == events[k] for k in d.keys] + [
        t < F.unix_micros(differing["window_end"]),
        t + F.lit(d.window.gap) > F.unix_micros(differing["window_start"]),
    ]
    return differing.join(events, reduce(lambda a, b: a & b, overlaps), "left_semi")


def _late_totals(late_rows, d: Declaration) -> dict:
    row = late_rows.agg(F.count(F.lit(1)), *(F.sum(m.name) for m in d.measures)).first()
    return {i: value or 0 for i, value in enumerate(row)}


def _truth_position(d: Declaration, tables, **options) -> int | None:
    return tables.committed_version(tables_of(d).truth.name, batch_app_of(d))


class _Compare:
    """``compare(sides)`` over a declaration, a value that pickles."""

    def __init__(self, declaration: Declaration) -> None:
        self.declaration = declaration

    def __call__(self, sides: Sides, **options) -> DeclaredReconciliation:
        return _compare(self.declaration, sides)


class _TruthPosition(_Compare):
    def __call__(self, tables, **options) -> int | None:
        return _truth_position(self.declaration, tables)


def reconcile_rule(d: Declaration) -> ReconcileRule:
    """The ``ReconcileRule`` of the pipeline ``d`` declares."""
    t = tables_of(d)
    return ReconcileRule(
        pipeline=d.name,
        stream=stream_rule(d),
        stream_tables=(t.windows, t.late),
        truth_tables=(t.truth,),
        truth_position=_TruthPosition(d),
        compare=_Compare(d),
        agreed=("declaration", "window"),
    )


def reconcile_declared(spark, config, d: Declaration, against: str = "speed") -> DeclaredReconciliation:
    """Diff the stream named by ``against`` (``speed`` or ``kappa:RUN``) with the truth."""
    return reconcile_stream(spark, config, reconcile_rule(d), against)


def _figures(totals: dict) -> str:
    return ", ".join(f"{name} {value:,}" for name, value in totals.items())


def render_text(result: DeclaredReconciliation) -> str:
    """The reconciliation as the command line prints it."""
    counts = ", ".join(f"{status} {count:,}" for status, count in result.statuses.items())
    lines = [
        f"{result.pipeline}: {result.against} (segments 1..{result.stream_last_segment}) against the truth "
        f"(segments 1..{result.truth_last_segment}): windows {counts}",
        f"totals: truth {_figures(result.truth_totals)}; stream {_figures(result.stream_totals)}; "
        f"late {_figures(result.late_totals)}",
        f"explained: {result.explained_late:,} windows by their late events (truth = stream + late), "
        f"{result.explained_unread:,} by segments the stream has not read yet",
        f"unexplained: {result.unexplained_count:,} windows",
        *(f"  {line}" for line in result.unexplained),
    ]
    return "\n".join(lines)

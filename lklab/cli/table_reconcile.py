"""``lklab reconcile --truth-table PATH --stream-table PATH --keys ... --measures ...``: the lab's
diff of two tables it did not write (``reconciliation.table_reconcile``), instead of a pipeline's
stream against its batch truth.

The two tables, ``--keys`` and ``--measures`` go together (exit 2 naming what is missing). The
flags that choose what a pipeline's reconciliation reads (``--against``, the days, the windows and
time settings, a pipeline's own settings) mean nothing here and are refused, never ignored. The
text (or with ``--json`` the JSON document, also written to ``--json-out``) goes to stdout; exit 3
after an ``UNEXPLAINED GAP`` line on stderr when, for some measure, the sum of ``|delta|`` over
the keys that differ exceeds ``--max-unexplained`` (at 0, the default: any key that differs).

``--pipeline NAME`` naming a pipeline declared in the configuration file explains the gaps from
its log in the lab's lake (``lklab.pipelines.declared.foreign_gaps``, matched by
``reconciliation.gap_reasons``): ``--keys`` must then be ``window_start``, ``window_end`` and the
declaration's keys, ``--measures`` ``event_count`` and its measures (any order; exit 2 naming the
column otherwise), the log must hold a segment, and ``--stream-read-through SEGMENT`` (0 up to the
log's last segment) says how far the stream had read. A registered pipeline is named in the output
but explains nothing (its log's events are not the foreign tables' windows): every differing key
is unexplained and ``explained_by`` is null. ``--stream-read-through`` without a declared pipeline
is refused.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from lklab.cli.console import UNHEALTHY, UsageError, progress, spark_for
from lklab.cli.options import config_from
from lklab.pipelines import REGISTRY
from lklab.pipelines.contract import Pipeline

__all__ = ["compares_tables", "reconcile_tables"]

_TABLE_FLAGS = ("truth_table", "stream_table", "keys", "measures", "stream_read_through")
_WHY_NOT = {
    "against": "the stream compared is --stream-table",
    "date": "the tables are compared whole",
    "date_from": "the tables are compared whole",
    "date_to": "the tables are compared whole",
    "max_unexplained_events": "--max-unexplained bounds every measure",
    **{
        name: "the tables are compared as they are, not computed from the log"
        for name in (
            "window_kind",
            "window_size",
            "window_slide",
            "session_gap",
            "watermark_delay",
            "watermark_interval",
            "allowed_lateness",
            "dedup_horizon",
            "heartbeat_interval",
            "max_clock_skew",
            "max_line_bytes",
        )
    },
}


def _flag(dest: str) -> str:
    return {"date_from": "--from", "date_to": "--to"}.get(dest, "--" + dest.replace("_", "-"))


def compares_tables(args: argparse.Namespace) -> bool:
    """Whether ``args`` ask for the diff of two tables (any of its four flags given)."""
    return any(getattr(args, dest, None) is not None for dest in _TABLE_FLAGS)


def _refuse_pipeline_flags(args: argparse.Namespace) -> None:
    parser = args.command_parser
    why = dict(_WHY_NOT)
    for pipeline in REGISTRY.values():
        for setting in pipeline.settings:
            why.setdefault(setting.flag[2:].replace("-", "_"), f"it is {pipeline.name}'s setting")
    for dest, reason in why.items():
        if hasattr(args, dest) and getattr(args, dest) != parser.get_default(dest):
            raise UsageError(
                f"{_flag(dest)} does not apply with --truth-table/--stream-table ({reason}); drop the flag"
            )


def _columns(text: str, flag: str) -> tuple[str, ...]:
    columns = tuple(c.strip() for c in text.split(","))
    if not all(columns):
        raise UsageError(f"{flag} {text!r}: give column names separated by commas, e.g. meter,region")
    return columns


def _inputs(args: argparse.Namespace):
    """The tables, keys, measures, tolerance and threshold the flags give (``UsageError``: bad ones)."""
    from reconciliation.foreign_tables import ForeignTableError, open_table
    from reconciliation.tolerance import Tolerance, parse_tolerance

    if args.truth_table is not None and args.stream_table is None:
        raise UsageError("--truth-table needs --stream-table: the diff compares two tables")
    if args.stream_table is not None and args.truth_table is None:
        raise UsageError("--stream-table needs --truth-table: the diff compares two tables")
    if args.truth_table is None:
        raise UsageError("--keys and --measures compare two tables: give --truth-table and --stream-table")
    for dest in ("keys", "measures"):
        if getattr(args, dest) is None:
            raise UsageError(f"--{dest} is required with --truth-table and --stream-table (comma-separated columns)")
    _refuse_pipeline_flags(args)
    try:
        tolerance = Tolerance(parse_tolerance(args.abs_tol, "abs-tol"), parse_tolerance(args.rel_tol, "rel-tol"))
        threshold = parse_tolerance(args.max_unexplained, "max-unexplained")
        tables = open_table(args.truth_table), open_table(args.stream_table)
    except (ValueError, ForeignTableError) as err:
        raise UsageError(str(err)) from None
    return tables, _columns(args.keys, "--keys"), _columns(args.measures, "--measures"), tolerance, threshold


def _declared(args: argparse.Namespace, pipeline: Pipeline, keys, measures):
    """The declaration ``--pipeline`` names (None: no pipeline given, or a registered one), its
    columns checked, and the log's last segment (``UsageError``: what does not fit)."""
    from lklab.cli.pipelines import check_declarations

    declaration = check_declarations(args).get(pipeline.name) if args.pipeline else None
    if declaration is None:
        if args.stream_read_through is not None:
            raise UsageError(
                "--stream-read-through needs --pipeline NAME of a declared pipeline: the segments are its log's"
            )
        return None, 0
    from lklab.pipelines.declared.foreign_gaps import EXPLAINING, check_columns
    from lklab.pipelines.declared.window_counts import fixed_windows
    from shared.eventlog import EventLog

    try:
        fixed_windows(declaration, EXPLAINING)
        check_columns(declaration, keys, measures)
    except ValueError as err:
        raise UsageError(str(err)) from None
    lake = config_from(args).lake
    last = EventLog(lake).last_segment()
    if last == 0:
        raise UsageError(
            f"the lake {lake} holds no log: the {declaration.name} pipeline's log explains the gaps; "
            "append it with lklab ingest"
        )
    through = args.stream_read_through
    if through is not None and not 0 <= through <= last:
        raise UsageError(f"--stream-read-through {through}: the log has segments 1..{last}; valid: 0..{last}")
    return declaration, last


def reconcile_tables(args: argparse.Namespace, pipeline: Pipeline) -> int:
    """The handler of ``lklab reconcile`` given two tables (the module docstring)."""
    from reconciliation.foreign_tables import ForeignTableError
    from reconciliation.render import render_text
    from reconciliation.table_reconcile import commit, compute
    from reconciliation.table_result import render_json
    from shared.tables import Tables

    (truth, stream), keys, measures, tolerance, threshold = _inputs(args)
    declaration, last_segment = _declared(args, pipeline, keys, measures)
    config = config_from(args)
    progress(f"reconciling {stream.describe()} against {truth.describe()} on {', '.join(keys)}")
    with spark_for(config, "lklab-reconcile-tables", ForeignTableError) as spark:
        tables = Tables(spark, config.lake, config.table_engine)
        reasons = None
        if declaration is not None:
            from lklab.pipelines.declared.foreign_gaps import gap_reasons, log_lines

            progress(f"reading the {declaration.name} pipeline's log (segments 1..{last_segment}) for the gaps")
            lines = log_lines(spark, str(config.lake), declaration, last_segment)
            reasons = gap_reasons(declaration, lines, last_segment, args.stream_read_through)
        result, rows = compute(
            spark,
            truth,
            stream,
            keys,
            measures,
            tolerance,
            tables=tables,
            pipeline=pipeline.name if args.pipeline else None,
            reasons=reasons,
        )
        if not commit(tables, result, rows):
            progress(f"run {result.run_id} is already in the lake: nothing written")
    rendered = render_json(result)
    if args.json_out:
        Path(args.json_out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json_out).write_text(rendered + "\n")
    print(rendered if args.json else render_text(result))
    breaches = result.breaches(threshold)
    for breach in breaches:
        print(f"lklab reconcile: UNEXPLAINED GAP: {breach}", file=sys.stderr)
    return UNHEALTHY if breaches else 0

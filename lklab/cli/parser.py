"""The ``lklab`` argument parser: every command, its flags and its handler.

A pipeline's command (``generate``, ``speed``, ``batch``, ``replay``, ``reconcile``, ``compare``)
has no handler here: the pipeline selected runs it (``lklab.cli.pipelines.pipeline_handler``)."""

from __future__ import annotations

import argparse
from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as distribution_version

from lklab.cli.compare import cmd_demo
from lklab.cli.completion import SHELLS, cmd_completion
from lklab.cli.flag_help import show_applicable
from lklab.cli.health import cmd_health
from lklab.cli.ingest import cmd_ingest
from lklab.cli.maintain import cmd_maintain
from lklab.cli.options import DEFAULT_DELAYS, DEFAULT_LATENESS
from lklab.cli.pipeline_init import cmd_init
from lklab.cli.stream_output import LOG_FORMATS
from lklab.cli.tables import cmd_tables
from lklab.pipelines import DEFAULT, REGISTRY
from lklab.pipelines.contract import Pipeline
from shared.catalog import BATCH_TRUTH, WINDOW_HISTORY, replay_prefix

DISTRIBUTION = "lambda-kappa-lab"  # pyproject.toml's [project] name


def lab_version() -> str:
    """The installed distribution's version, else the package's own (a checkout run without installing it)."""
    try:
        return distribution_version(DISTRIBUTION)
    except PackageNotFoundError:
        from lklab import __version__

        return __version__


class _Parser(argparse.ArgumentParser):
    """A flag no command knows is reported with the usage of the command it was given to, not the top level's."""

    def parse_args(self, args=None, namespace=None):
        parsed, unknown = self.parse_known_args(args, namespace)
        if unknown:
            getattr(parsed, "command_parser", self).error(f"unrecognized arguments: {' '.join(unknown)}")
        return parsed


def _common(parser: argparse.ArgumentParser, windows: bool = True, selected: Pipeline | None = None) -> None:
    parser.add_argument("--lake", help="lake directory (default ./lake, env LKLAB_LAKE)")
    parser.add_argument("--config", help="TOML configuration file (default ./lklab.toml if present)")
    parser.add_argument(
        "--pipeline",
        help=f"which pipeline (default {DEFAULT}): "
        + " | ".join(f"{p.name} ({p.computes})" for p in REGISTRY.values()),
    )
    if windows:
        group = parser.add_argument_group("windows and time")
        group.add_argument("--window-kind", help="tumbling | sliding | session (default tumbling)")
        group.add_argument("--window-size", help="window length, e.g. 2m (default 1m)")
        group.add_argument("--window-slide", help="sliding windows: start every, e.g. 30s")
        group.add_argument("--session-gap", help="session windows: inactivity that ends one (default 5m)")
        group.add_argument("--watermark-delay", help="how far the watermark trails the max event time (default 1m)")
        group.add_argument(
            "--watermark-interval",
            help="the watermark moves once per tick of this much processing time "
            "(ingest time), ticks aligned to the epoch (default 1s; 0: after every line)",
        )
        group.add_argument(
            "--allowed-lateness", help="how long after the watermark a window still takes events (default 0s)"
        )
        group.add_argument("--dedup-horizon", help="how long an event_id is remembered by the stream (default 1h)")
        group.add_argument(
            "--heartbeat-interval",
            help="always-on speed layer: append a heartbeat after the log has been "
            "quiet this long, so open windows still become final (default 1m; 0: never)",
        )
        group.add_argument(
            "--max-clock-skew",
            help="an event time this much ahead of its ingest time is a dead letter, event_time_in_future (default 5m)",
        )
        group.add_argument(
            "--max-line-bytes", help="a longer log line is a dead letter, line_too_long (default 1048576)"
        )
        group.add_argument("--spark-master", help="Spark master URL (default local[2])")
        group.add_argument(
            "--driver-memory",
            help="heap of the Spark driver this command starts, e.g. 8g (default 4g; "
            "local mode runs the executors in it too; ignored under spark-submit, which takes --driver-memory)",
        )
        group.add_argument("--table-engine", help="auto | deltalake | delta-spark (default auto)")
        for pipeline in REGISTRY.values():
            if pipeline.settings:
                own = parser.add_argument_group(f"{pipeline.name} only")
                for setting in pipeline.settings:
                    own.add_argument(setting.flag, help=setting.help)
        if selected is None:
            parser.epilog = (
                f"flags under 'NAME only' apply with --pipeline NAME; '{parser.prog} --pipeline NAME --help' "
                f"lists only the flags NAME takes\n\n{parser.epilog}"
            )


def _add_days(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("days (UTC day of window_start)")
    group.add_argument("--date", help="one day, YYYY-MM-DD")
    group.add_argument("--from", dest="date_from", help="first day of a range (with --to)")
    group.add_argument("--to", dest="date_to", help="last day of a range (with --from)")


def _command(sub, name: str, summary: str, example: str) -> argparse.ArgumentParser:
    command = sub.add_parser(
        name,
        help=summary,
        description=summary,
        epilog=f"example:\n  {example}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    command.set_defaults(
        command_parser=command
    )  # its defaults tell a flag given from one left alone (lklab.cli.pipelines)
    return command


def _add_compare_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("comparison")
    group.description = (
        "--watermark-delay and --allowed-lateness take comma-separated lists to sweep here "
        f"(default {DEFAULT_DELAYS} and {DEFAULT_LATENESS})"
    )
    group.add_argument(
        "--segments-per-batch",
        type=int,
        default=10,
        help="segments per micro-batch of the live streams: their rows do not depend on it, their cost does (default 10)",
    )
    group.add_argument(
        "--error-step", default="10s", help="sample the error over processing time every this much (default 10s)"
    )
    group.add_argument("--name", help="report name: <lake>/reports/NAME/ (default compare-<UTC time>)")
    group.add_argument(
        "--target-completeness",
        default="99.5%",
        help="the report recommends the cheapest configuration whose completeness when final reaches this "
        "(a percentage or a fraction; default 99.5%%)",
    )
    group.add_argument(
        "--events-per-second",
        type=float,
        default=1_000,
        help="the event rate the report prices each architecture at, in CPU per day (default 1,000)",
    )
    group.add_argument(
        "--verbose",
        action="store_true",
        help="print the streams' records per micro-batch on stderr too (always in <report>/streams.log)",
    )


def _add_generate_options(
    parser: argparse.ArgumentParser,
    events_default: int,
    *,
    span: str = "6h",
    segment_interval: str = "1m",
    scenario: str | None = "billing",
) -> None:
    from lklab.scenarios import SCENARIOS

    if scenario is None:
        parser.add_argument(
            "--scenario", help=f"generate this scenario first: {' | '.join(SCENARIOS)} (default: use the lake's log)"
        )
    else:
        parser.add_argument("--scenario", default=scenario, help=f"{' | '.join(SCENARIOS)} (default {scenario})")
    parser.add_argument(
        "--events", type=int, default=events_default, help=f"number of real events (default {events_default:,})"
    )
    parser.add_argument(
        "--seed", type=int, default=7, help="random seed: the same seed writes the same log (default 7)"
    )
    parser.add_argument("--span", default=span, help=f"event-time span of the traffic (default {span})")
    parser.add_argument("--accounts", type=int, default=40, help="number of accounts (default 40)")
    parser.add_argument(
        "--duplicate-rate", type=float, default=0.01, help="share of events resent by a retry (default 0.01)"
    )
    parser.add_argument(
        "--malformed-rate", type=float, default=0.001, help="share of extra malformed lines (default 0.001)"
    )
    parser.add_argument(
        "--segment-interval",
        default=segment_interval,
        help=f"ingest time covered by one log segment (default {segment_interval})",
    )
    parser.add_argument("--overwrite", action="store_true", help="replace the lake's existing log and tables")


def build_parser(pipeline: Pipeline | None = None) -> argparse.ArgumentParser:
    """The ``lklab`` parser; its help lists the flags that apply on ``pipeline`` (None: on any
    registered pipeline; ``lklab.cli.flag_help``)."""
    parser = _Parser(
        prog="lklab",
        description="Run Lambda and Kappa side by side on one event log and measure the difference.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {lab_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    demo = _command(
        sub,
        "demo",
        "Generate a scenario and compare Lambda and Kappa over it (the main job); prints where the report is.",
        "lklab demo",
    )
    _common(demo, selected=pipeline)
    _add_generate_options(demo, 3_000, span="2h", segment_interval="1m")
    _add_compare_options(demo)
    demo.set_defaults(handler=cmd_demo)

    compare = _command(
        sub,
        "compare",
        "Lambda vs Kappa on one log: sweep watermark delays and allowed lateness, write the report.",
        "lklab compare --scenario billing --events 20000 --watermark-delay 10s,1m,10m --allowed-lateness 0,1h",
    )
    _common(compare, selected=pipeline)
    _add_generate_options(compare, 3_000, span="2h", segment_interval="1m", scenario=None)
    _add_compare_options(compare)

    generate = _command(
        sub,
        "generate",
        "Write a deterministic scenario log and its ground truth.",
        "lklab generate --scenario billing --events 1000000 --seed 7 --lake ./lake",
    )
    _common(generate, selected=pipeline)
    _add_generate_options(generate, 100_000)

    ingest = _command(
        sub,
        "ingest",
        "Append JSON-lines files to the log, one segment per file (bad lines kept; an empty file is refused "
        "with exit 2 before anything is appended).",
        "lklab ingest events-1.jsonl events-2.jsonl --lake ./lake",
    )
    _common(ingest, windows=False)
    ingest.add_argument("files", nargs="+", metavar="FILE", help="JSON-lines file(s), appended in the order given")
    ingest.add_argument(
        "--strict",
        action="store_true",
        help="append nothing when most lines of a file would be dead letters (exit 2)",
    )
    ingest.set_defaults(handler=cmd_ingest)

    batch = _command(
        sub,
        "batch",
        "Recompute the per-window truth from the complete log with Spark.",
        "lklab batch --date 2026-01-31   (or --from 2026-01-01 --to 2026-01-31; no date: every window)",
    )
    _common(batch, selected=pipeline)
    _add_days(batch)
    batch.add_argument(
        "--refresh",
        action="store_true",
        help="read up to the log's current end, not the position recorded for these days",
    )
    batch.add_argument(
        "--whole-log",
        action="store_true",
        help="read the log from its first segment, not on from the segments the last run kept in batch_events "
        "(billing's batch; the other pipelines' batches read the whole log every run)",
    )

    speed = _command(
        sub,
        "speed",
        "Run the streaming speed layer over the log (always on; SIGTERM stops it after the current micro-batch).",
        "lklab speed --available-now --watermark-delay 30s --allowed-lateness 5m",
    )
    _common(speed, selected=pipeline)
    speed.add_argument("--available-now", action="store_true", help="process everything in the log, then exit")
    speed.add_argument(
        "--segments-per-batch",
        type=int,
        default=None,
        help="at most this many segments per micro-batch; the rows do not depend on it (default: 1 with "
        "--available-now; always on 100, so a stream behind takes its backlog at once and catches up)",
    )
    speed.add_argument(
        "--log-format",
        choices=LOG_FORMATS,
        help="each micro-batch's record as JSON (for a log shipper) or as text (default: text on a terminal, else json)",
    )
    speed.add_argument("--quiet", action="store_true", help="no record per micro-batch: the last line and errors only")

    replay = _command(
        sub,
        "replay",
        "Kappa replay: re-run the streaming job over the whole log into kappa/RUN/ tables of its own.",
        "lklab replay --name lateness-1h --allowed-lateness 1h",
    )
    _common(replay, selected=pipeline)
    replay.add_argument("--name", required=True, help=f"run name: its tables are {replay_prefix('NAME')}...")
    replay.add_argument("--replace", action="store_true", help="delete an existing replay of that name first")
    replay.add_argument(
        "--history",
        action="store_true",
        help=f"also write {WINDOW_HISTORY.name}: every change of a window row, line by line, at its processing time",
    )

    from lklab.cli.advise import add_advise_options, cmd_advise

    advise = _command(
        sub,
        "advise",
        "The watermark delay's whole trade-off on the lake's log, exact (late events and money, completeness "
        "and time until final per delay, from one pass), and the delay to choose.",
        "lklab advise --allowed-lateness 0s --watermark-delay 10s,45s,3m --target-completeness 99.5% "
        "--json-out advice.json",
    )
    _common(advise, selected=pipeline)
    add_advise_options(advise)
    advise.set_defaults(handler=cmd_advise)

    reconcile = _command(
        sub,
        "reconcile",
        f"Diff a stream against {BATCH_TRUTH.name}, explain every gap, fold the late side output back in "
        "(exit 3 when the unexplained gap exceeds the threshold).",
        "lklab reconcile --date 2026-01-05 --against kappa:lateness-1h --json-out recon.json\n"
        "  lklab reconcile --truth-table truth/ --stream-table stream.parquet "
        "--keys window_start,meter --measures kwh --json-out recon.json",
    )
    _common(reconcile, selected=pipeline)
    _add_days(reconcile)
    reconcile.add_argument("--against", default="speed", help="speed | kappa:RUN (default speed)")
    reconcile.add_argument("--abs-tol", default="0", help="absolute money tolerance per window (default 0: exact)")
    reconcile.add_argument(
        "--rel-tol", default="0", help="relative money tolerance, a fraction of the truth (default 0)"
    )
    reconcile.add_argument(
        "--max-unexplained", default="0", help="unexplained money per currency that is still acceptable (default 0)"
    )
    reconcile.add_argument(
        "--max-unexplained-events",
        type=int,
        default=0,
        help="unexplained events per currency still acceptable (default 0)",
    )
    reconcile.add_argument("--json", action="store_true", help="print the JSON summary instead of text")
    reconcile.add_argument("--json-out", help="also write the JSON summary to this file")
    tables = reconcile.add_argument_group("any two tables")
    tables.description = (
        "diff two keyed tables the lab did not write (Delta or Parquet, by any engine) instead of a "
        "pipeline's stream: all four flags together; --abs-tol, --rel-tol and --max-unexplained then "
        "apply to every measure"
    )
    tables.add_argument("--truth-table", metavar="PATH", help="the reference: a Delta table's folder or Parquet")
    tables.add_argument("--stream-table", metavar="PATH", help="the table compared with it: Delta or Parquet")
    tables.add_argument("--keys", help="comma-separated columns naming one row on each side")
    tables.add_argument("--measures", help="comma-separated number columns compared per key")
    tables.add_argument(
        "--stream-read-through",
        type=int,
        metavar="SEGMENT",
        help="with --pipeline of a declared pipeline: the last log segment the stream table had read "
        "(its gaps from later segments are then explained)",
    )

    health = _command(
        sub,
        "health",
        "Is a pipeline's live stream keeping up (--pipeline; the default: billing's speed layer)? Freshness, "
        "backlog, watermark lag where the stream has a watermark, and the live latency of the last micro-batches "
        "(exit 3 when unhealthy).",
        "lklab health --max-staleness 10m --max-watermark-lag 15m --max-latency 2m",
    )
    _common(health, windows=False)
    health.add_argument(
        "--max-staleness", default="10m", help="no commit for this long while segments wait is a stall (default 10m)"
    )
    health.add_argument("--max-watermark-lag", default="15m", help="watermark lag beyond this is lagging (default 15m)")
    health.add_argument(
        "--max-latency",
        default="2m",
        help="a micro-batch whose lines' p95 wait from publication to commit exceeds this is slow (default 2m)",
    )
    health.add_argument(
        "--latency-window", default="10m", help="the live latency is shown over the batches of this long (default 10m)"
    )
    health.add_argument("--json", action="store_true", help="print the check as JSON")
    health.set_defaults(handler=cmd_health)

    listing = _command(
        sub,
        "tables",
        "Where each of a pipeline's tables is (--pipeline), its rows and Delta version: by role (truth, stream, "
        "late, duplicates, dead_letters ...) for a declared pipeline, by name for the others.",
        "lklab tables --pipeline meter_kwh --config meters.toml --json",
    )
    _common(listing, windows=False)
    listing.add_argument("--json", action="store_true", help="print them as a JSON object, role -> path")
    listing.add_argument(
        "--sizes", action="store_true", help="with --json: role -> {path, written, rows, version} (reads every table)"
    )
    listing.add_argument(
        "--against",
        default="speed",
        help="whose stream tables: speed (the live stream's) | kappa:RUN (a replay's, under kappa/RUN/); default speed",
    )
    listing.set_defaults(handler=cmd_tables)

    from lklab.cli.show import cmd_show

    show = _command(
        sub,
        "show",
        "Print rows of one of a pipeline's tables (a name `lklab tables` lists), read with delta-rs: no Spark.",
        "lklab show dead_letter --where \"reject_reason = 'not_json'\" --limit 5",
    )
    _common(show, windows=False)
    show.add_argument("table", metavar="TABLE", help="a table as `lklab tables` lists it (or by its own name)")
    show.add_argument("--where", help="a SQL predicate over its columns, e.g. \"segment > 3 AND reject_reason = 'x'\"")
    show.add_argument("--limit", type=int, default=20, help="rows printed at most (default 20; 0: every row)")
    show.add_argument("--against", default="speed", help="whose stream tables: speed | kappa:RUN (default speed)")
    formats = show.add_mutually_exclusive_group()
    formats.add_argument("--json", action="store_true", help="print the rows as JSON, with how many matched")
    formats.add_argument("--csv", action="store_true", help="print the rows as CSV (the count line on stderr)")
    show.set_defaults(handler=cmd_show)

    maintain = _command(
        sub,
        "maintain",
        "Compact and VACUUM the always-on tables (speed layer, reconciliation history); "
        "time travel stays possible within the retention.",
        "lklab maintain --retention 7d",
    )
    _common(maintain, windows=False)
    maintain.add_argument(
        "--retention",
        default="7d",
        help="keep every version committed this recently readable: whole hours from 1h to 30d (default 7d)",
    )
    maintain.add_argument("--json", action="store_true", help="print what was done as JSON")
    maintain.set_defaults(handler=cmd_maintain)

    init = _command(
        sub,
        "init",
        "Propose a declared pipeline ([pipelines.NAME] in the TOML file) from a sample of your JSON-lines "
        "events, with a comment on what to check beside each guess.",
        "lklab init --pipeline meter_kwh --sample readings.jsonl --config meters.toml",
    )
    init.add_argument("--pipeline", required=True, help="the name of the pipeline declared")
    init.add_argument("--sample", required=True, metavar="FILE", help="JSON-lines events, one object a line")
    init.add_argument(
        "--config", metavar="OUT", help="write the proposal to this new file (refused if it exists; default: print it)"
    )
    init.add_argument(
        "--lines", type=int, default=1000, help="read at most this many lines of the sample (default 1000)"
    )
    # it names a pipeline that does not exist yet and reads no configuration: no pipeline's handler
    init.set_defaults(handler=cmd_init, reads_no_configuration=True)

    completion = _command(
        sub,
        "completion",
        "Print a shell completion script: commands, their flags and the pipelines' names.",
        "lklab completion bash > ~/.local/share/bash-completion/completions/lklab\n"
        '  lklab completion zsh > "${fpath[1]}/_lklab"',
    )
    completion.add_argument("shell", choices=SHELLS, help="the shell it is for")
    completion.set_defaults(handler=cmd_completion, reads_no_configuration=True)
    for name, command in sub.choices.items():
        if name not in ("init", "completion"):  # init's --pipeline names a pipeline to declare
            show_applicable(command, name, pipeline)
    return parser

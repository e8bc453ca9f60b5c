"""Which pipeline a command runs, and the flags that mean nothing to it.

**The pipeline** is ``--pipeline`` (or the setting ``pipeline`` in a file or the environment),
looked up in the one registry, ``lklab.pipelines.REGISTRY``. Every pipeline, the default one
included, is served alike: a command the pipeline lists in its ``jobs`` runs through
``lklab.cli.pipeline_jobs`` (``compare`` runs ``lklab.cli.compare`` for a pipeline that declares
a ``Comparison``); a pipeline's command it declares no job for is refused (exit 2, naming the
ones it has). ``reconcile`` given two tables (``--truth-table``, ``--stream-table``) diffs them
instead, whichever pipeline is selected (``lklab.cli.table_reconcile``). The lake's commands (``ingest``, ``health``, ``maintain``) and ``demo`` (the
default pipeline's comparison over a scenario it generates) have handlers of their own.

**Flags that do not apply.** The commands share one parser, so a command accepts flags that one
of its pipelines has no use for (``batch --date`` means nothing to a truth recomputed from the
whole log). Such a flag, given, is refused with exit 2 and a message naming it, the command, the
pipeline and why, never silently ignored. The reasons come from the declarations: the
pipeline's own ``inapplicable`` rules, ``COMMON`` (true of every pipeline), and every other
pipeline's settings (``--state-ttl`` means nothing to a pipeline that does not declare it). A
flag counts as given when its value differs from the parser's default. Settings from a file or
the environment are shared by every pipeline and are not checked.

**Declared pipelines** (``[pipelines.NAME]`` sections with a ``kind``,
``lklab.pipelines.declared``) are validated by every command that reads the file
(``check_declarations``, exit 2 naming the key; a declared name that is also a registered one is
refused), and ``--pipeline NAME`` finds them beside the registered ones
(``lklab.pipelines.declared.pipeline.pipeline_of``). ``lklab init``, which drafts one, reads no
configuration and has a handler of its own, as ``lklab completion`` has.
"""

from __future__ import annotations

import argparse
import os
from functools import partial

from lklab.cli.console import UsageError
from lklab.pipelines import REGISTRY, UnknownPipeline, find
from lklab.pipelines.contract import PER_PIPELINE, Handler, Inapplicable, Pipeline
from shared.config import ConfigError, load_config

__all__ = [
    "pipeline_handler",
    "COMMON",
    "refuse_inapplicable",
    "refused_flags",
    "selected_pipeline",
    "check_declarations",
]

COMMON = (
    Inapplicable(
        ("--allowed-lateness",),
        ("generate", "batch"),
        "the allowed lateness judges a stream's events; the log and the batch truth do not depend on it",
    ),
)
_DESTS = {"--from": "date_from", "--to": "date_to"}


def _dest(flag: str) -> str:
    return _DESTS.get(flag, flag[2:].replace("-", "_"))


def _given(args: argparse.Namespace, flag: str) -> bool:
    dest = _dest(flag)
    if not hasattr(args, dest):
        return False
    parser = getattr(args, "command_parser", None)
    default = parser.get_default(dest) if parser is not None else None
    return getattr(args, dest) != default


def _rules(pipeline: Pipeline) -> tuple[Inapplicable, ...]:
    """Every flag ``pipeline``'s commands refuse: its own rules, the common ones, other pipelines' settings."""
    others = tuple(
        Inapplicable((setting.flag,), ("*",), f"{setting.key} is {other.name}'s: {setting.help}")
        for other in REGISTRY.values()
        if other.name != pipeline.name
        for setting in other.settings
        if setting not in pipeline.settings
    )
    return (*pipeline.inapplicable, *COMMON, *others)


def refused_flags(pipeline: Pipeline, command: str) -> frozenset[str]:
    """The flags ``command`` on ``pipeline`` refuses (``--help`` leaves them out)."""
    return frozenset(flag for rule in _rules(pipeline) if rule.applies(command) for flag in rule.flags)


def _variable(flag: str) -> str:
    """The environment variable of the setting ``flag`` sets (``--watermark-delay``: ``LKLAB_WATERMARK_DELAY``)."""
    return "LKLAB_" + flag.removeprefix("--").replace("-", "_").upper()


def refuse_inapplicable(args: argparse.Namespace, pipeline: Pipeline) -> None:
    """Raise ``UsageError`` for the first flag given that ``args.command`` on ``pipeline`` has no
    use for (or its environment variable set, where the rule says so)."""
    for rule in _rules(pipeline):
        if rule.applies(args.command):
            for flag in rule.flags:
                if _given(args, flag):
                    raise UsageError(
                        f"{flag} does not apply to '{args.command}' on the {pipeline.name} pipeline: {rule.reason}; "
                        "drop the flag"
                    )
                if rule.environment and os.environ.get(_variable(flag)):
                    raise UsageError(
                        f"{_variable(flag)} does not apply to '{args.command}' on the {pipeline.name} pipeline: "
                        f"{rule.reason}; unset it"
                    )


def check_declarations(args: argparse.Namespace) -> dict:
    """The pipelines declared in the configuration file in use, by name; a bad declaration is a
    ``UsageError`` naming its key, whatever the command (a file is right or wrong as a whole)."""
    from lklab.pipelines.declared.declaration import load_declarations

    try:
        found = load_declarations(args.config)
    except ConfigError as err:
        raise UsageError(str(err)) from None
    taken = sorted(set(found) & set(REGISTRY))
    if taken:
        raise UsageError(
            f"[pipelines.{taken[0]}] declares a pipeline named like a registered one; valid: any name but "
            f"{', '.join(REGISTRY)}"
        )
    return found


def selected_pipeline(args: argparse.Namespace) -> Pipeline:
    """The pipeline ``args`` (or the configuration) names: a registered one, else one the
    configuration file declares; any other name refused, naming the valid ones."""
    declared = check_declarations(args)
    try:  # only the pipeline: the command validates its other settings itself (compare sweeps lists)
        name = load_config(args.config, {"pipeline": getattr(args, "pipeline", None)}).pipeline
        if name in declared:
            from lklab.pipelines.declared.pipeline import pipeline_of

            return pipeline_of(declared[name])
        return find(name)
    except UnknownPipeline:
        valid = ", ".join([*REGISTRY, *declared])
        raise UsageError(f"pipeline: {name!r} is not valid; valid: {valid}") from None
    except (ConfigError, ValueError) as err:
        raise UsageError(str(err)) from None


def pipeline_handler(args: argparse.Namespace) -> Handler | None:
    """The handler of ``args.command`` for the pipeline configured (None: a command that is not a
    pipeline's, served by its own handler), once the flags it has no use for are refused."""
    if getattr(args, "reads_no_configuration", False):
        return None
    pipeline = selected_pipeline(args)
    if args.command == "reconcile":
        from lklab.cli.table_reconcile import compares_tables, reconcile_tables

        if compares_tables(args):  # two tables the lab did not write: no pipeline's job runs
            return partial(reconcile_tables, pipeline=pipeline)
    refuse_inapplicable(args, pipeline)
    if args.command not in PER_PIPELINE:
        return None
    if args.command == "compare" and pipeline.compare is not None:
        from lklab.cli.compare import compare_pipeline

        return partial(compare_pipeline, pipeline=pipeline)
    from lklab.cli.pipeline_jobs import handler_for

    handler = handler_for(pipeline, args.command)
    if handler is None:
        found = sorted([*pipeline.jobs().commands(), *(["compare"] if pipeline.compare else [])])
        raise UsageError(f"{pipeline.name} has no '{args.command}' command; it has: {', '.join(found)}")
    return handler

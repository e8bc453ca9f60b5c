"""Which pipeline a command runs, and the flags that mean nothing to it.

**The pipeline** is ``--pipeline`` (or the setting ``pipeline`` in a file or the environment).
``billing_windows`` is the lab's first pipeline and runs through the commands' own handlers;
another pipeline's commands are in its own module, ``PIPELINE_COMMANDS[name]``, as functions
``cmd_<command>``; ``compare`` is the same for every such pipeline (``lklab.cli.pipeline_compare``).

**Flags that do not apply.** The commands share one parser, so a command accepts flags that one
of its pipelines has no use for (``batch --date`` means nothing to a truth recomputed from the
whole log). Such a flag, given, is refused with exit 2 and a message naming it, the command, the
pipeline and why (``NOT_APPLICABLE``), never silently ignored. A flag counts as given when its
value differs from the parser's default. Settings from a file or the environment are shared by
every pipeline and are not checked.

The pipelines' commands also share ``stream_stop`` (``speed``: the micro-batch size checked,
SIGTERM wired to stop after the current micro-batch) and ``replay_name`` (``replay``: the run name
checked).
"""

from __future__ import annotations

import argparse
import importlib
import signal
import threading
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

from lklab.cli.console import UsageError
from shared.config import ConfigError, load_config

__all__ = [
    "pipeline_handler",
    "PIPELINE_COMMANDS",
    "NOT_APPLICABLE",
    "Inapplicable",
    "refuse_inapplicable",
    "stream_stop",
    "replay_name",
]

BILLING = "billing_windows"
# The commands whose work depends on the pipeline (ingest, health and maintenance do not).
PER_PIPELINE = ("generate", "speed", "batch", "replay", "reconcile", "compare")
PIPELINE_COMMANDS = {"unique_visitors": "lklab.cli.visitors", "order_payments": "lklab.cli.payments"}
_OTHERS = tuple(PIPELINE_COMMANDS)
_EVERY = (BILLING, *_OTHERS)
_DESTS = {"--from": "date_from", "--to": "date_to"}


@dataclass(frozen=True)
class Inapplicable:
    """``flags`` mean nothing to ``commands`` (``"*"``: every command) on ``pipelines``, because ``reason``."""

    flags: tuple[str, ...]
    pipelines: tuple[str, ...]
    commands: tuple[str, ...]
    reason: str

    def applies(self, command: str, pipeline: str) -> bool:
        return pipeline in self.pipelines and ("*" in self.commands or command in self.commands)


NOT_APPLICABLE = (
    Inapplicable(
        ("--date", "--from", "--to"), _OTHERS, ("batch",), "its truth is recomputed from the whole log every time"
    ),
    Inapplicable(
        (
            "--date",
            "--from",
            "--to",
            "--abs-tol",
            "--rel-tol",
            "--max-unexplained",
            "--max-unexplained-events",
            "--json",
            "--json-out",
        ),
        _OTHERS,
        ("reconcile",),
        "its reconciliation compares every output the stream served and prints text; days, money tolerances and the JSON "
        "summary are billing's",
    ),
    Inapplicable(("--history",), _OTHERS, ("replay",), "window_history records billing's window rows"),
    Inapplicable(
        ("--scenario", "--accounts"),
        ("order_payments",),
        ("generate",),
        "its generator has one traffic shape (--events orders, their payments, gateway retries, offline clients, "
        "a regional outage)",
    ),
    Inapplicable(
        ("--allowed-lateness",),
        _EVERY,
        ("generate", "batch"),
        "the allowed lateness judges a stream's events; the log and the batch truth do not depend on it",
    ),
    Inapplicable(
        ("--allowed-lateness",),
        _OTHERS,
        ("reconcile",),
        "the reconciliation reads what the stream's tables recorded, whatever allowed lateness they ran with",
    ),
    Inapplicable(
        (
            "--events",
            "--seed",
            "--span",
            "--accounts",
            "--duplicate-rate",
            "--malformed-rate",
            "--segment-interval",
            "--overwrite",
        ),
        _OTHERS,
        ("compare",),
        "it compares on the lake's log: write that with 'lklab generate' and these flags first",
    ),
    Inapplicable(("--pipeline",), _OTHERS, ("health", "maintain", "demo"), "this command serves billing_windows only"),
    Inapplicable(
        ("--state-ttl",), (BILLING, "order_payments"), ("*",), "the state TTL is unique_visitors' (its seen URLs)"
    ),
    Inapplicable(("--join-bound",), (BILLING, "unique_visitors"), ("*",), "the join bound is order_payments'"),
    Inapplicable(
        ("--window-kind", "--window-size", "--window-slide", "--session-gap"),
        ("order_payments",),
        ("*",),
        "the interval join has no windows (a payment's interval is --join-bound)",
    ),
)


def _dest(flag: str) -> str:
    return _DESTS.get(flag, flag[2:].replace("-", "_"))


def _given(args: argparse.Namespace, flag: str) -> bool:
    dest = _dest(flag)
    if not hasattr(args, dest):
        return False
    parser = getattr(args, "command_parser", None)
    default = parser.get_default(dest) if parser is not None else None
    return getattr(args, dest) != default


def refuse_inapplicable(args: argparse.Namespace, pipeline: str) -> None:
    """Raise ``UsageError`` for the first flag given that ``args.command`` on ``pipeline`` has no use for."""
    for rule in NOT_APPLICABLE:
        if rule.applies(args.command, pipeline):
            for flag in rule.flags:
                if _given(args, flag):
                    raise UsageError(
                        f"{flag} does not apply to '{args.command}' on the {pipeline} pipeline: {rule.reason}; "
                        "drop the flag"
                    )


def _pipeline(args: argparse.Namespace) -> str:
    try:  # only the pipeline: the command validates its other settings itself (compare sweeps lists)
        return load_config(args.config, {"pipeline": getattr(args, "pipeline", None)}).pipeline
    except ConfigError as err:
        raise UsageError(str(err)) from None


def pipeline_handler(args: argparse.Namespace) -> Callable[[argparse.Namespace], int] | None:
    """The handler of ``args.command`` for the pipeline configured (None: the command's own),
    once the flags it has no use for are refused."""
    pipeline = _pipeline(args)
    refuse_inapplicable(args, pipeline)
    if args.command not in PER_PIPELINE or pipeline not in PIPELINE_COMMANDS:
        return None
    if args.command == "compare":
        from lklab.cli.pipeline_compare import compare_pipeline

        return partial(compare_pipeline, pipeline=pipeline)
    commands = importlib.import_module(PIPELINE_COMMANDS[pipeline])
    handler = getattr(commands, f"cmd_{args.command}", None)
    if handler is None:
        found = [command for command in PER_PIPELINE if command == "compare" or hasattr(commands, f"cmd_{command}")]
        raise UsageError(f"{pipeline} has no '{args.command}' command; it has: {', '.join(sorted(found))}")
    return handler


def stream_stop(args: argparse.Namespace) -> threading.Event:
    """``speed``: check ``--segments-per-batch``; the event SIGTERM sets (the stream stops after its current micro-batch)."""
    if args.segments_per_batch < 1:
        raise UsageError(f"--segments-per-batch must be at least 1, got {args.segments_per_batch}")
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    return stop


def replay_name(args: argparse.Namespace) -> str:
    """``replay``: the table prefix of ``--name`` (``kappa/NAME/``), a bad name refused."""
    from shared.catalog import replay_prefix

    try:
        return replay_prefix(args.name)
    except ValueError as err:
        raise UsageError(str(err)) from None

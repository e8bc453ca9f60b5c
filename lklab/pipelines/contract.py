"""The pipeline contract: what a pipeline declares, so that the commands, the report and the DAGs
serve it without asking which pipeline it is.

A pipeline is one package under ``lklab.pipelines`` holding only what differs from the others
(its line format, its rule and state, its truth, its reconciliation rule, its generator), and
one ``Pipeline`` value, ``PIPELINE`` in the package's ``__init__``, entered once in the registry
(``lklab.pipelines.REGISTRY``). As Beam's ``WindowFn`` carries its own ``assign`` and
``merge`` and a runner executes any of them, a ``Pipeline`` carries its own pieces and the
command line finds them by name: ``lklab COMMAND --pipeline NAME``.

What a pipeline declares:

* ``name``: the value of ``--pipeline`` and the setting ``pipeline``; ``computes``: one line
  saying what its outputs are (``--help`` and the docs show it);
* ``settings``: the settings only it reads (``--state-ttl`` ...), shown under its own heading
  in ``--help``; another pipeline refuses them;
* ``inapplicable``: flags one of its commands has no use for, each with the reason; given,
  such a flag is refused (exit 2), never silently ignored;
* ``jobs``: what its commands run (``Jobs``: ``generate``, ``speed``, ``batch``, ``replay``,
  ``reconcile``, each a function of the Spark session and the configuration returning what to
  print), as a function returning them, so that naming a pipeline imports none of its code; the
  command line (``lklab.cli.pipeline_jobs``) does the rest: flags, the session, exit codes;
* ``stream``: its live stream's ``StreamRule`` (``lklab.live_stream``; None: it has none), as a
  function importing it when asked: maintenance reads which tables it rewrites and its lock;
* ``compare``: how ``lklab compare`` runs on it (``Comparison``), or None;
* ``dags``: what its nightly and replay DAGs need beyond their shape (``DagSpec``; None: it has
  none), made by ``lklab.pipeline_dags``;
* ``command_handlers``: true for the pipeline the commands' own handlers serve (the default
  pipeline); any other pipeline refuses a command it declares no job for.

``imported`` and ``called`` make such a function from where the piece lives
(``"module:NAME"``, as ``shared.catalog.Table`` names a schema).

Nothing here knows a pipeline: this module is the shape, the packages are the instances.
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "Setting",
    "Inapplicable",
    "Comparison",
    "Outcome",
    "GenerateRequest",
    "Jobs",
    "DagSpec",
    "Pipeline",
    "Handler",
    "EVERY_COMMAND",
    "PER_PIPELINE",
    "imported",
    "called",
]

Handler = Callable[[argparse.Namespace], int]
EVERY_COMMAND = "*"
# The commands whose work is a pipeline's own (ingest, health and maintenance are the lake's).
PER_PIPELINE = ("generate", "speed", "batch", "replay", "reconcile", "compare")


def imported(path: str) -> Callable[[], Any]:
    """A function returning what ``path`` names (``"module:NAME"``), imported when it is called:
    naming a pipeline imports none of its code."""

    def load() -> Any:
        module, name = path.split(":")
        return getattr(importlib.import_module(module), name)

    return load


def called(path: str) -> Callable[[], Any]:
    """A function returning what the function ``path`` names (``imported``) returns when called."""
    load = imported(path)
    return lambda: load()()


@dataclass(frozen=True)
class Setting:
    """A setting only one pipeline reads: ``key`` as a user writes it (``state-ttl``, the flag
    ``--state-ttl``, the environment's ``LKLAB_STATE_TTL``) and its ``help``."""

    key: str
    help: str

    @property
    def flag(self) -> str:
        return f"--{self.key}"


@dataclass(frozen=True)
class Inapplicable:
    """``flags`` mean nothing to ``commands`` (``"*"``: every command) of the pipeline, because ``reason``."""

    flags: tuple[str, ...]
    commands: tuple[str, ...]
    reason: str

    def applies(self, command: str) -> bool:
        return EVERY_COMMAND in self.commands or command in self.commands


@dataclass(frozen=True)
class Comparison:
    """How ``lklab compare`` runs on a pipeline.

    ``sweeps``: settings of the pipeline that ``compare`` takes as comma-separated lists and
    passes to ``run`` as ``{key: (value, ...)}``; ``check(config)`` raises ``ValueError`` for a
    configuration the pipeline cannot serve (before any Spark starts);
    ``run(spark, config, plan, sweeps, source, progress)`` returns the report model
    (``lklab.report.pipeline_model.PipelineReport``)."""

    run: Callable[..., Any]
    sweeps: tuple[str, ...] = ()
    check: Callable[[Any], None] = lambda config: None


@dataclass(frozen=True)
class Outcome:
    """What a job reports: ``text`` to print; ``failed`` (exit 1: e.g. lines not conserved);
    ``unexplained`` differences (exit 3 after a verdict line saying ``why``)."""

    text: str
    failed: bool = False
    unexplained: int = 0
    why: str = ""


@dataclass(frozen=True)
class GenerateRequest:
    """``lklab generate``'s options, parsed: durations in microseconds."""

    scenario: str | None
    events: int
    seed: int
    span: int
    accounts: int
    duplicate_rate: float
    malformed_rate: float
    segment_interval: int
    overwrite: bool


@dataclass(frozen=True)
class Jobs:
    """What a pipeline's commands run (None: the pipeline has no such command).

    ``generate(config, request) -> str``; ``speed(spark, config, available_now=, segments_per_batch=,
    stop=) -> Outcome``; ``batch(spark, config) -> Outcome``; ``replay(spark, config, name, replace=)
    -> Outcome``; ``reconcile(spark, config, against) -> Outcome``. ``check(config)`` raises
    ``ValueError`` for a configuration the pipeline cannot serve, before any Spark starts;
    ``refused``: the errors that are bad input (exit 2), not failures; ``describe(config)``: the
    settings its progress lines name."""

    generate: Callable[..., str] | None = None
    speed: Callable[..., Outcome] | None = None
    batch: Callable[..., Outcome] | None = None
    replay: Callable[..., Outcome] | None = None
    reconcile: Callable[..., Outcome] | None = None
    check: Callable[[Any], None] = lambda config: None
    refused: tuple[type[Exception], ...] = ()
    describe: Callable[[Any], str] = lambda config: ""

    def commands(self) -> tuple[str, ...]:
        return tuple(name for name in PER_PIPELINE if getattr(self, name, None) is not None)


@dataclass(frozen=True)
class DagSpec:
    """What a pipeline's DAGs (``<name>_nightly``, ``<name>_replay``) need beyond their shape.

    ``nightly_at``: the cron expression of the nightly run, UTC (pipelines at different times, so
    their Spark jobs do not share the cluster with each other or with billing's at 00:00).
    ``truth``: the tables the batch writes that others are scheduled on (assets);
    ``reconciled``: the tables the reconcile writes; ``reconcile_writes``: what it writes, in
    words, for the DAG's doc; ``batch_tables``: everything the batch replaces (for the doc).
    ``replay_settings``: the stream settings a replay takes as params, with their defaults."""

    nightly_at: str
    truth: tuple[Any, ...]
    batch_tables: tuple[Any, ...]
    reconcile_writes: str
    reconciled: tuple[Any, ...] = ()
    replay_settings: tuple[tuple[str, str], ...] = (("watermark-delay", "1m"), ("allowed-lateness", "0s"))


@dataclass(frozen=True)
class Pipeline:
    """One pipeline, as the command line, the report and the DAGs see it (the module docstring)."""

    name: str
    computes: str
    settings: tuple[Setting, ...] = ()
    inapplicable: tuple[Inapplicable, ...] = ()
    jobs: Callable[[], Jobs] = field(default=lambda: Jobs())
    stream: Callable[[], Any] = field(default=lambda: None)
    compare: Comparison | None = None
    dags: DagSpec | None = None
    command_handlers: bool = False

    def refusal(self, command: str, given: Callable[[str], bool]) -> str | None:
        """Why the first flag ``given`` that ``command`` has no use for on this pipeline is refused (None: none)."""
        for rule in self.inapplicable:
            if rule.applies(command):
                for flag in rule.flags:
                    if given(flag):
                        return (
                            f"{flag} does not apply to '{command}' on the {self.name} pipeline: {rule.reason}; "
                            "drop the flag"
                        )
        return None

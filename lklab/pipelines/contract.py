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
  command line (``lklab.cli.pipeline_jobs``) does the rest: flags, the session, exit codes. A
  command it declares no job for is refused (exit 2, naming the ones it has);
* ``stream``: its live stream's ``StreamRule`` (``lklab.live_stream``; None: it has none), as a
  function importing it when asked: maintenance reads which tables it rewrites and its lock, and
  ``lklab speed`` prints the records of its ``logger`` as machine records;
* ``compare``: how ``lklab compare`` runs on it (``Comparison``), or None;
* ``advise``: how ``lklab advise`` reads its log for the watermark advisor (``Advising``), or
  None (a pipeline without event-time windows);
* ``dags``: what its nightly and replay DAGs need beyond their shape (``DagSpec``; None: it has
  none), made by ``lklab.pipeline_dags``;
* ``lines``: what its lines look like (``LineFormat``), as a function returning it: ``lklab
  ingest`` checks a file against it before appending it;
* ``tables``: its tables by role (``truth``, ``stream``, ``late`` ...), as a function returning
  them (None: ``lklab tables`` lists its stream's layout and its batch's tables by name).

Every pipeline is served the same way, the default one (``lklab.pipelines.DEFAULT``) included.
A job that needs more than the flags every pipeline's job takes names the command's other
flags it takes (``Jobs.takes``, from ``OPTIONS``); a job that must settle its configuration
before Spark starts (adopt what the lake's tables were built with, refuse a held lock) does so
in ``Jobs.prepare``; one whose progress lines differ from the command line's says so in
``Jobs.announce``.

``imported`` and ``called`` make such a function from where the piece lives
(``"module:NAME"``, as ``shared.catalog.Table`` names a schema).

Nothing here knows a pipeline: this module is the shape, the packages are the instances.
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "Setting",
    "Inapplicable",
    "Comparison",
    "Advising",
    "Outcome",
    "GenerateRequest",
    "Jobs",
    "DagSpec",
    "LineFormat",
    "Pipeline",
    "Handler",
    "EVERY_COMMAND",
    "PER_PIPELINE",
    "imported",
    "called",
    "OPTIONS",
]

Handler = Callable[[argparse.Namespace], int]
EVERY_COMMAND = "*"
# The commands whose work is a pipeline's own (ingest, health and maintenance are the lake's).
PER_PIPELINE = ("generate", "speed", "batch", "replay", "reconcile", "compare")
# The commands a pipeline's ``Jobs`` runs (``compare`` is its ``Comparison``).
_JOB_COMMANDS = ("generate", "speed", "batch", "replay", "reconcile")
# The flags a pipeline's job may take beyond the ones every pipeline's job of that command takes
# (``Jobs.takes``), by the name the job receives them as: ``days`` is ``--date``/``--from``/``--to``
# read as a ``shared.partitions.DayRange``; the others are the flags' values as parsed.
OPTIONS = (
    "days",
    "refresh",
    "whole_log",
    "history",
    "abs_tol",
    "rel_tol",
    "max_unexplained",
    "max_unexplained_events",
    "json",
    "json_out",
)


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
    """``flags`` mean nothing to ``commands`` (``"*"``: every command) of the pipeline, because
    ``reason``. With ``environment``, the settings' environment variables (``--watermark-delay``:
    ``LKLAB_WATERMARK_DELAY``) are refused as the flags are, rather than left unread."""

    flags: tuple[str, ...]
    commands: tuple[str, ...]
    reason: str
    environment: bool = False

    def applies(self, command: str) -> bool:
        return EVERY_COMMAND in self.commands or command in self.commands


@dataclass(frozen=True)
class Comparison:
    """How ``lklab compare`` runs on a pipeline.

    ``sweeps``: settings of the pipeline that ``compare`` takes as comma-separated lists and
    passes to ``run`` as ``{key: (value, ...)}``; ``check(config)`` raises ``ValueError`` for a
    configuration the pipeline cannot serve (before any Spark starts);
    ``run(spark, config, plan, sweeps, source, progress)`` returns the report model.

    ``prepare(config, scenario)``: the configuration the comparison runs with (``scenario``: the
    one ``--scenario`` generates first, or None: the lake's log as it is), e.g. with the settings
    the lake's tables were built with; raises ``ValueError`` for a contradiction (exit 2).
    ``generates``: None refuses ``--scenario`` (write the log with ``lklab generate`` first);
    else ``compare --scenario`` (and ``lklab demo``) first writes that scenario with the
    pipeline's ``generate`` job, over a lake for which ``generates(lake)`` gives no reason not
    to replace it (a reason refuses it without ``--overwrite``). ``processing_time``: the plan
    adds the processing-time baseline (``lklab.comparison_runs.ComparisonPlan``).
    ``publish(report, directory) -> (text, unhealthy)``: writes the report's files under
    ``directory`` and returns what to print, and whether a configuration left a difference
    unexplained (exit 3); None: the report is a ``lklab.report.pipeline_model.PipelineReport``,
    written and summed up by the command line (``lklab.report.pipeline_render``).
    ``sweep``: the watermark delays and allowed lateness swept when no flag gives them
    (comma-separated, as written; None: the command line's defaults). ``writes_log``: the command
    that writes the log it compares on, as a user types it (empty: ``lklab generate``)."""

    run: Callable[..., Any]
    sweeps: tuple[str, ...] = ()
    check: Callable[[Any], None] = lambda config: None
    prepare: Callable[[Any, str | None], Any] = lambda config, scenario: config
    generates: Callable[[Any], str | None] | None = None
    processing_time: bool = False
    publish: Callable[[Any, Any], tuple[str, bool]] | None = None
    sweep: tuple[str, str] | None = None
    writes_log: str = ""


@dataclass(frozen=True)
class Advising:
    """How ``lklab advise`` reads a pipeline's log for the watermark advisor
    (``lklab.watermark_advisor``).

    ``read(spark, config, allowed_lateness, progress)`` returns its ``AdvisorLog``: every line's
    clock, and its (first copy, window) pairs with their money or measures (``allowed_lateness``:
    microseconds, None: the pipeline's own setting). ``prepare(config)``: the configuration it
    reads with (billing: the windows the lake's tables were built with); ``check(config)`` raises
    ``ValueError`` for one it cannot advise on exactly (session windows), before Spark starts."""

    read: Callable[..., Any]
    check: Callable[[Any], None] = lambda config: None
    prepare: Callable[[Any], Any] = lambda config: config


@dataclass(frozen=True)
class Outcome:
    """What a job reports: ``text`` to print (an empty text prints nothing); ``failed`` (exit 1:
    e.g. lines not conserved); ``unexplained`` differences (exit 3 after a verdict line saying
    ``why``); ``verdicts``: the verdict lines of a job whose verdict is not a count of differences
    (thresholds breached), each printed on stderr as ``lklab COMMAND: VERDICT`` after the text
    (exit 3 when there is one)."""

    text: str
    failed: bool = False
    unexplained: int = 0
    why: str = ""
    verdicts: tuple[str, ...] = ()


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
    ``refused``: the errors of its own that are bad input (exit 2), not failures (the runners'
    own are refused for every pipeline); ``describe(config)``: the settings its progress lines
    name.

    ``takes``: the flags (names from ``OPTIONS``) its jobs take as keyword arguments beyond those,
    each passed to the job of every command that has the flag (``batch`` and ``reconcile`` have
    ``days``). ``prepare(command, config, options) -> config``: before any Spark starts, once the
    flags are read, the configuration ``command`` runs with (``options``: the keyword arguments
    its job gets, with ``name`` for ``replay``, ``against`` for ``reconcile``); it raises
    ``ValueError`` for bad input (exit 2). ``announce(command, config, options) -> str | None``:
    the progress line ``command`` starts with, before its Spark session (``compare`` too, its
    options ``name`` and ``configurations``); None: the command line's own. ``app``: what the
    names of its Spark applications start with (``app-COMMAND``; empty: ``lklab-<name>``).

    ``Jobs.of(generate, speed, ...)`` takes the jobs by their functions' names: a jobs module
    names each job after its command."""

    generate: Callable[..., str] | None = None
    speed: Callable[..., Outcome] | None = None
    batch: Callable[..., Outcome] | None = None
    replay: Callable[..., Outcome] | None = None
    reconcile: Callable[..., Outcome] | None = None
    check: Callable[[Any], None] = lambda config: None
    refused: tuple[type[Exception], ...] = ()
    describe: Callable[[Any], str] = lambda config: ""
    takes: tuple[str, ...] = ()
    prepare: Callable[[str, Any, Mapping[str, Any]], Any] = lambda command, config, options: config
    announce: Callable[[str, Any, Mapping[str, Any]], str | None] | None = None
    app: str = ""

    def __post_init__(self) -> None:
        unknown = sorted(set(self.takes) - set(OPTIONS))
        if unknown:
            raise ValueError(f"Jobs.takes: {', '.join(unknown)} not among {', '.join(OPTIONS)}")

    @classmethod
    def of(cls, *jobs: Callable[..., Any], **declared: Any) -> Jobs:
        """The ``jobs``, each serving the command its function is named after (``def speed``: the
        ``speed`` job), with the ``declared`` fields beyond them (``refused=``, ``describe=`` ...)."""
        named = {job.__name__: job for job in jobs}
        unknown = sorted(set(named) - set(_JOB_COMMANDS))
        if unknown:
            raise ValueError(f"Jobs.of: {', '.join(unknown)} not among {', '.join(_JOB_COMMANDS)}")
        return cls(**named, **declared)

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
    ``replay_settings``: the stream settings a replay takes as params, with their defaults;
    ``replayed``: the tables a replay writes that are assets (its run history, say).
    ``by_day``: the truth is recomputed one UTC day per run (``<name>_truth``, ``--date``) and the
    stream reconciled for every day a recompute covered (``<name>_reconcile``, scheduled on the
    truth), instead of both over the whole log nightly (``<name>_nightly``). ``dag_ids``: DAG ids
    other than ``<name>_<shape>``, by shape (``nightly``, ``truth``, ``reconcile``, ``replay``)."""

    nightly_at: str
    truth: tuple[Any, ...]
    batch_tables: tuple[Any, ...]
    reconcile_writes: str
    reconciled: tuple[Any, ...] = ()
    replay_settings: tuple[tuple[str, str], ...] = (("watermark-delay", "1m"), ("allowed-lateness", "0s"))
    replayed: tuple[Any, ...] = ()
    by_day: bool = False
    dag_ids: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class LineFormat:
    """What a pipeline's lines look like, for ``lklab ingest`` to say what a file holds before it
    is appended (``lklab.line_preview``). ``fields``: the fields every event line needs, as a user
    writes them; ``check(raw, config)``: the lines (``segment``, ``line_number``, ``raw_line``,
    ``line_bytes``) to rows with ``raw_line``, ``reject_reason``, ``reject_detail`` and
    ``heartbeat``, in Arrow, no Spark; ``exact``: ``check`` is the pipeline's own parser (else
    only the checks every line gets, the fields and the event time); ``max_line_bytes``: where
    the pipeline's readers cut a line (None: the configuration's)."""

    fields: tuple[str, ...]
    check: Callable[[Any, Any], Any]
    exact: bool
    max_line_bytes: int | None = None


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
    advise: Advising | None = None
    dags: DagSpec | None = None
    tables: Callable[[], Mapping[str, Any]] | None = None
    lines: Callable[[], LineFormat] | None = None

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

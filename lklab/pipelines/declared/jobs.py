"""What the commands run for a declared pipeline, each a few lines over a runner that knows no
pipeline: ``speed`` and ``replay`` the stream rule (``stream.stream_rule``) through
``lklab.live_stream`` and ``lklab.replay_runner``, ``batch`` the truth rule through
``lklab.truth_runner``, ``reconcile`` the keyed diff explained by the late side output
(``reconcile``). ``generate`` is refused: a declared pipeline's log is the user's own lines,
appended with ``lklab ingest --pipeline NAME FILE...``.

Every job is a ``functools.partial`` over the ``Declaration``; ``prepare`` puts the
declaration's windows and stream settings into the command's configuration (the flags that
would set them are refused: ``pipeline.INAPPLICABLE``).
"""

from __future__ import annotations

from functools import partial

from lklab.pipelines.contract import Jobs, Outcome
from lklab.pipelines.declared.declaration import Declaration

__all__ = ["jobs_of", "conservation"]

_PARTS = ("events", "late_events", "duplicates", "dead_letters", "heartbeats")


def conservation(lines: int, figures: dict, parts: tuple[str, ...] = _PARTS) -> tuple[str, bool]:
    """``lines`` against the sum of ``parts`` in ``figures``: the text and whether every line is in one place."""
    kept = lines == sum(figures[k] for k in parts)
    text = " + ".join(f"{figures[k]:,} {k.replace('_', ' ')}" for k in parts)
    return f"{lines:,} lines = {text} ({'conserved' if kept else 'NOT CONSERVED'})", kept


def generate(d: Declaration, config, request) -> str:
    raise ValueError(
        f"{d.name} is a declared pipeline: its log is your own JSON lines, there is nothing to generate; "
        f"append them with 'lklab ingest --pipeline {d.name} FILE...'"
    )


def _stream_outcome(d: Declaration, tables, prefix: str, heading: str = "", tail: str = "") -> Outcome:
    from lklab.pipelines.declared.tables import tables_of

    t = tables_of(d)
    metrics = tables.read_arrow(t.stream_metrics.at(prefix))
    totals = {name: sum(v or 0 for v in metrics[name].to_pylist()) for name in ("input_lines", *_PARTS)}
    text, kept = conservation(totals["input_lines"], totals)
    windows = tables.read_arrow(t.windows.at(prefix)).num_rows
    return Outcome(
        f"{heading}{metrics.num_rows} micro-batches: {text}; {windows:,} windows in {t.windows.at(prefix)}{tail}",
        failed=not kept,
    )


def speed(d: Declaration, spark, config, *, available_now: bool, segments_per_batch: int | None, stop) -> Outcome:
    from lklab.pipelines.declared.stream import stream_rule

    stream = stream_rule(d).run(
        spark, config, available_now=available_now, segments_per_batch=segments_per_batch, stop=stop
    )
    return _stream_outcome(d, stream.tables, stream.sink.prefix)


def replay(d: Declaration, spark, config, name: str, *, replace: bool) -> Outcome:
    from lklab.pipelines.declared.stream import stream_rule
    from lklab.replay_runner import replay_on_executors
    from shared.tables import Tables

    run = replay_on_executors(spark, config, stream_rule(d), name, replace=replace)
    return _stream_outcome(
        d,
        Tables(spark, config.lake, config.table_engine),
        run.prefix,
        f"replay {name}: ",
        f"; {run.cost()}",
    )


def batch(d: Declaration, spark, config) -> Outcome:
    from lklab.pipelines.declared.tables import tables_of
    from lklab.pipelines.declared.truth import DeclaredTruth
    from lklab.truth_runner import run_truth

    run = run_truth(spark, config, DeclaredTruth(d))
    parts = ("events", "duplicates", "dead_letters", "heartbeats")
    text, kept = conservation(run.figures["lines"], dict(run.figures), parts)
    return Outcome(
        f"{tables_of(d).truth.name}: from segments 1..{run.last_segment}; {text}; {run.wall_seconds:.1f} s wall",
        failed=not kept,
    )


def reconcile(d: Declaration, spark, config, against: str) -> Outcome:
    from lklab.pipelines.declared.reconcile import reconcile_declared, render_text

    result = reconcile_declared(spark, config, d, against)
    return Outcome(
        render_text(result),
        unexplained=result.unexplained_count,
        why="a window whose difference its late events and the unread segments do not account for",
    )


def _prepare(d: Declaration, command: str, config, options):
    from lklab.pipelines.declared.stream import config_of

    return config_of(d, config)


def _describe(d: Declaration, config) -> str:
    return f"{d.window.describe()}, watermark delay {config.describe()['watermark-delay']}"


def jobs_of(d: Declaration) -> Jobs:
    """The jobs of the pipeline ``d`` declares."""
    return Jobs(
        generate=partial(generate, d),
        speed=partial(speed, d),
        batch=partial(batch, d),
        replay=partial(replay, d),
        reconcile=partial(reconcile, d),
        prepare=partial(_prepare, d),
        describe=partial(_describe, d),
    )

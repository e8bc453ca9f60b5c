"""What the ``running_max`` commands run, each a few lines over a runner that knows no pipeline:
``speed`` and ``replay`` run the stream rule (``stream.MAX_RULE``) through ``lklab.live_stream``
and ``lklab.replay_runner``, ``batch`` the truth rule through ``lklab.truth_runner``,
``reconcile`` the keyed diff (``reconcile``). The command line does the rest
(``lklab.cli.pipeline_jobs``)."""

from __future__ import annotations

from lklab.pipelines.contract import GenerateRequest, Jobs, Outcome

__all__ = ["jobs"]

_PARTS = ("readings", "duplicates", "dead_letters", "heartbeats")


def _conservation(lines: int, figures: dict) -> tuple[str, bool]:
    kept = lines == sum(figures[k] for k in _PARTS)
    parts = " + ".join(f"{figures[k]:,} {k.replace('_', ' ')}" for k in _PARTS)
    return f"{lines:,} lines = {parts} ({'conserved' if kept else 'NOT CONSERVED'})", kept


def generate(config, request: GenerateRequest) -> str:
    from lklab.generate_job import generated_log, log_written
    from lklab.pipelines.running_max.generator import ReadingParams, generate_readings

    made = generated_log(config, request, ReadingParams, generate_readings, readings="events", keys="accounts")
    counts = f"{made['readings']:,} readings, {made['duplicates']:,} resends, {made['malformed']:,} malformed lines"
    return f"{counts}: {log_written(made, config.lake)}"


def _stream_outcome(tables, prefix: str, heading: str = "", tail: str = "") -> Outcome:
    from lklab.pipelines.running_max.tables import MAX_STREAM, MAX_STREAM_METRICS

    metrics = tables.read_arrow(MAX_STREAM_METRICS.at(prefix))
    totals = {name: sum(metrics[name].to_pylist()) for name in ("input_lines", *_PARTS)}
    text, kept = _conservation(totals["input_lines"], totals)
    keys = tables.read_arrow(MAX_STREAM.at(prefix)).num_rows
    return Outcome(
        f"{heading}{metrics.num_rows} micro-batches: {text}; {keys:,} keys in {MAX_STREAM.at(prefix)}{tail}",
        failed=not kept,
    )


def speed(spark, config, *, available_now: bool, segments_per_batch: int | None, stop) -> Outcome:
    from lklab.pipelines.running_max.stream import MAX_RULE

    stream = MAX_RULE.run(spark, config, available_now=available_now, segments_per_batch=segments_per_batch, stop=stop)
    return _stream_outcome(stream.tables, stream.sink.prefix)


def replay(spark, config, name: str, *, replace: bool) -> Outcome:
    from lklab.pipelines.running_max.stream import MAX_RULE
    from lklab.replay_runner import replay_on_executors
    from shared.tables import Tables

    run = replay_on_executors(spark, config, MAX_RULE, name, replace=replace)
    return _stream_outcome(
        Tables(spark, config.lake, config.table_engine),
        run.prefix,
        f"replay {name}: ",
        f"; {run.cost()}",
    )


def batch(spark, config) -> Outcome:
    from lklab.pipelines.running_max.tables import MAX_TRUTH
    from lklab.pipelines.running_max.truth import MAX_TRUTH_RULE
    from lklab.truth_runner import run_truth

    run = run_truth(spark, config, MAX_TRUTH_RULE)
    text, kept = _conservation(run.figures["lines"], dict(run.figures))
    return Outcome(
        f"{MAX_TRUTH.name}: from segments 1..{run.last_segment}; {text}; {run.wall_seconds:.1f} s wall", failed=not kept
    )


def reconcile(spark, config, against: str) -> Outcome:
    from lklab.pipelines.running_max.reconcile import reconcile_max, render_text

    result = reconcile_max(spark, config, against)
    return Outcome(
        render_text(result),
        unexplained=len(result.unexplained),
        why="a key whose maximum differs with no unread reading of it",
    )


def jobs() -> Jobs:
    return Jobs.of(generate, speed, batch, replay, reconcile)

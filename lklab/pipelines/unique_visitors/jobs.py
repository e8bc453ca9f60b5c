"""What the ``unique_visitors`` commands run (``lklab COMMAND --pipeline unique_visitors``), and
what each reports. The command line does the rest (``lklab.cli.pipeline_jobs``).

generate: a page-view log (``generator``; ``--accounts`` is the number of users); speed: the
stream (``speed``); batch: the truth (``batch``); replay: a Kappa replay (``replay``);
reconcile: a stream against the truth (``reconcile``), unexplained when a URL is in only one
side's members with no side output explaining it. Windows must be tumbling or sliding.
"""

from __future__ import annotations

from lklab.pipelines.contract import GenerateRequest, Jobs, Outcome

__all__ = ["jobs"]


def _check(config) -> None:
    from lklab.pipelines.unique_visitors.rule import require_fixed

    require_fixed(config.window)


def _describe(config) -> str:
    return f"{config.window.describe()} windows, state TTL {config.describe()['state-ttl']}"


def generate(config, request: GenerateRequest) -> str:
    from lklab.generate_job import generated_log, log_written
    from lklab.pipelines.unique_visitors.generator import PageViewParams, generate_page_views

    made = generated_log(config, request, PageViewParams, generate_page_views, views="events", users="accounts")
    malformed = sum(made["dead_letters"].values())
    counts = f"{made['views']:,} page views, {made['duplicates']:,} resends, {malformed:,} malformed lines"
    return f"{counts}: {log_written(made, config.lake)}"


def speed(spark, config, *, available_now: bool, segments_per_batch: int | None, stop) -> Outcome:
    from lklab.pipelines.unique_visitors.speed import run_visitors_speed
    from lklab.pipelines.unique_visitors.tables import VISITORS_SEEN, VISITORS_STREAM_METRICS
    from shared.eventlog import format_timestamp

    layer = run_visitors_speed(
        spark, config, available_now=available_now, segments_per_batch=segments_per_batch, stop=stop
    )
    metrics = layer.tables.read_arrow(layer.table(VISITORS_STREAM_METRICS)).sort_by("batch_id")
    seen = layer.tables.read_arrow(layer.table(VISITORS_SEEN))
    totals = {
        name: sum(metrics[name].to_pylist())
        for name in ("input_lines", "views", "duplicates", "dead_letters", "new_urls", "late_pairs")
    }
    lines = [
        f"{metrics.num_rows} micro-batches: {totals['input_lines']:,} lines = {totals['views']:,} views + "
        f"{totals['duplicates']:,} duplicates + {totals['dead_letters']:,} dead letters (+ heartbeats); "
        f"{totals['new_urls']:,} URLs counted, {totals['late_pairs']:,} late (side output)"
    ]
    if metrics.num_rows:
        as_of = format_timestamp(seen["as_of"][0].as_py()) if seen.num_rows else "-"
        lines.append(
            f"{VISITORS_SEEN.name}: {seen.num_rows:,} URLs seen by {len(set(seen['user_id'].to_pylist())):,} users "
            f"within the state TTL {config.describe()['state-ttl']}, as of {as_of}; "
            f"state: {metrics['state_entries'][-1].as_py():,} member entries"
        )
    return Outcome("\n".join(lines))


def batch(spark, config) -> Outcome:
    from lklab.pipelines.unique_visitors.batch import run_visitors_batch
    from lklab.pipelines.unique_visitors.tables import VISITORS_TRUTH

    run = run_visitors_batch(spark, config)
    return Outcome(
        f"{VISITORS_TRUTH.name}: {run.windows:,} (window, user) rows, {run.members:,} members, from segments "
        f"1..{run.last_segment}\n{run.lines:,} lines = {run.views:,} views + {run.duplicates:,} duplicates + "
        f"{run.dead_letters:,} dead letters + {run.heartbeats:,} heartbeats "
        f"({'conserved' if run.conserved else 'NOT CONSERVED'}); {run.wall_seconds:.1f} s wall",
        failed=not run.conserved,
    )


def replay(spark, config, name: str, *, replace: bool) -> Outcome:
    from lklab.pipelines.unique_visitors.speed import replay_visitors
    from shared.catalog import replay_prefix, tables_root

    run = replay_visitors(spark, config, name, replace=replace)
    return Outcome(
        f"replay {run.name}: {run.lines:,} lines over {run.segments:,} segments in {run.micro_batches:,} "
        f"micro-batches, walked in one executor task; {run.wall_seconds:.1f} s "
        f"wall, {run.cpu_seconds:.1f} CPU seconds ({run.cost_scope}); tables under "
        f"{tables_root(config.lake) / replay_prefix(name)}"
    )


def reconcile(spark, config, against: str) -> Outcome:
    from lklab.pipelines.unique_visitors.reconcile import reconcile_visitors, render_text

    reconciled = reconcile_visitors(spark, config, against=against)
    return Outcome(
        render_text(reconciled),
        unexplained=reconciled.result.reasons().get("unexplained", 0),
        why="a URL in the stream's or the truth's members only, no side output explaining it",
    )


def jobs() -> Jobs:
    return Jobs.of(generate, speed, batch, replay, reconcile, check=_check, describe=_describe)

"""What the ``order_payments`` commands run (``lklab COMMAND --pipeline order_payments``), and
what each reports. The command line does the rest (``lklab.cli.pipeline_jobs``).

generate: an order/payment log (``generator``); speed and replay: the stream, live and as a
Kappa replay (``stream``, with the join bound, watermark delay and allowed lateness); batch: the
truth (``batch``) checked against the generator's oracle; reconcile: a stream against the truth
and the finance audit (``reconcile``), unexplained when a difference has no explanation.
"""

from __future__ import annotations

from lklab.pipelines.contract import GenerateRequest, Jobs, Outcome

__all__ = ["jobs"]

_TOTALS = ("input_lines", "on_time", "late", "duplicates", "dead_letters", "heartbeats", "matched", "unpaid", "orphans")


def _describe(config) -> str:
    """The settings the join's rows depend on, as the progress lines name them."""
    settings = config.describe()
    return (
        f"join bound {settings['join-bound']}, watermark delay {settings['watermark-delay']}, "
        f"allowed lateness {settings['allowed-lateness']}"
    )


def generate(config, request: GenerateRequest) -> str:
    import shutil

    from lklab.generate_job import log_written
    from lklab.generator_params import from_request
    from lklab.pipelines.order_payments.generator import OrderPaymentParams, generate_order_payments
    from shared.locks import whole_lake

    params = from_request(OrderPaymentParams, request, orders="events", retry_rate="duplicate_rate")
    if request.overwrite:
        with whole_lake(config.lake):
            for part in ("log", "tables", "generator", "checkpoints", "reports"):
                shutil.rmtree(config.lake / part, ignore_errors=True)
    made = generate_order_payments(params, config.lake).manifest
    return (
        f"{made['orders']:,} orders, {made['payments']:,} payments, {made['retries']:,} retries, "
        f"{sum(made['dead_letters'].values()):,} malformed lines: {log_written(made, config.lake)}"
    )


def speed(spark, config, *, available_now: bool, segments_per_batch: int | None, stop) -> Outcome:
    from lklab.pipelines.order_payments.stream import run_payments_speed
    from lklab.pipelines.order_payments.tables import PAYMENTS_STREAM_METRICS

    stream = run_payments_speed(
        spark, config, available_now=available_now, segments_per_batch=segments_per_batch, stop=stop
    )
    metrics = stream.tables.read_arrow(stream.table(PAYMENTS_STREAM_METRICS))
    total = {name: sum(metrics[name].to_pylist()) for name in metrics.column_names if name in _TOTALS}
    return Outcome(
        f"{metrics.num_rows} micro-batches: {total['input_lines']:,} lines = {total['on_time']:,} on time + "
        f"{total['late']:,} late + {total['duplicates']:,} duplicates + {total['dead_letters']:,} dead letters + "
        f"{total['heartbeats']:,} heartbeats; {total['matched']:,} matched, {total['unpaid']:,} unpaid, "
        f"{total['orphans']:,} orphans"
    )


def batch(spark, config) -> Outcome:
    from lklab.pipelines.order_payments.batch import run_payments_batch
    from lklab.pipelines.order_payments.generator import load_order_payments
    from lklab.pipelines.order_payments.truth import join_truth

    run = run_payments_batch(spark, config)
    lines = [
        f"segments 1..{run.last_segment}: {run.lines:,} lines = {run.orders:,} orders + {run.payments:,} payments + "
        f"{run.duplicates:,} duplicates + {run.dead_letters:,} dead letters + {run.heartbeats:,} heartbeats "
        f"({'conserved' if run.conserved else 'NOT CONSERVED'}); {run.matched:,} matched, {run.unpaid:,} unpaid, "
        f"{run.orphans:,} orphans"
    ]
    generated = load_order_payments(config.lake)
    agrees = None
    if generated is not None:
        oracle = join_truth(generated, config.join_bound)
        found = (len(oracle.matched), len(oracle.unpaid), len(oracle.orphans))
        agrees = found == (run.matched, run.unpaid, run.orphans)
        lines.append(
            f"generator's oracle: {found[0]:,} matched, {found[1]:,} unpaid, {found[2]:,} orphans "
            f"({'agrees' if agrees else 'DIFFERS'})"
        )
    return Outcome("\n".join(lines), failed=not run.conserved or agrees is False)


def replay(spark, config, name: str, *, replace: bool) -> Outcome:
    from lklab.pipelines.order_payments.stream import PAYMENTS_RULE
    from lklab.replay_runner import replay_on_executors

    run = replay_on_executors(spark, config, PAYMENTS_RULE, name, replace=replace)
    return Outcome(
        f"replay {run.name}: {run.lines:,} lines over {run.segments:,} segments in {run.micro_batches:,} "
        f"micro-batches, walked in one executor task; {run.wall_seconds:.1f} s wall, {run.cpu_seconds:.1f} CPU "
        f"seconds ({run.cost_scope}); tables {run.prefix}payments_*"
    )


def reconcile(spark, config, against: str) -> Outcome:
    from lklab.pipelines.order_payments.reconcile import reconcile_payments, render_text

    found = reconcile_payments(spark, config, against=against)
    return Outcome(render_text(found), unexplained=found.result.unexplained)


def jobs() -> Jobs:
    return Jobs.of(generate, speed, batch, replay, reconcile, refused=(ValueError,), describe=_describe)

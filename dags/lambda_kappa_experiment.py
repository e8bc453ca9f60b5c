"""``lambda_kappa_experiment``: one end-to-end comparison of Lambda and Kappa on one log.

Manual. On a lake of its own (``lake``; left empty: ``$LKLAB_EXPERIMENT_LAKE``, else the
configured lake's path with ``-experiment`` appended, read when the run starts), never the
live one:

0. ``claim_lake`` refuses the configured live lake and any lake holding data the experiment
   did not make (``lklab.experiment_lake``): the steps below overwrite what they find, in the
   lake it returns;
1. ``generate_log`` writes a scenario log (skipped with ``generate: false`` to use the log
   already in that lake);
2. Lambda: ``speed_layer`` (the streaming job over the whole log, then stops) and
   ``batch_recompute`` (the truth for every window);
3. Kappa: ``kappa_replay`` (the streaming job again, under ``run_name``, with the run's
   watermark delay and allowed lateness);
4. ``reconcile_speed`` and ``reconcile_kappa``: each streaming result against the truth.

The steps are the CLI's (``lklab generate``, ``speed``, ``batch``, ``replay``, ``reconcile``):
the same generator function and the same ``spark_jobs`` entry points. An explained gap (late
events, duplicates, dead letters) is the experiment's result; an unexplained one is a breach
(``reconcile_job`` exits 3) and fails its task at once, without retries.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from airflow.sdk import Param, dag, task

from lklab.spark_task import spark_job

DURATION = r"^\d+(ms|s|m|h|d)$|^0$"
BREACH = 3  # reconcile_job's exit code: an unexplained gap
LAKE = "{{ ti.xcom_pull(task_ids='claim_lake') }}"  # the lake claim_lake claimed
STREAM_SETTINGS = [
    "--watermark-delay",
    "{{ params.watermark_delay }}",
    "--allowed-lateness",
    "{{ params.allowed_lateness }}",
]


def spark_step(task_id: str, job: str, *args: str, **operator_args):
    """A step of the experiment: ``spark_jobs/<job>.py --lake <lake> ARGS`` via ``spark_default``."""
    return spark_job(
        task_id,
        job,
        ["--lake", LAKE, *args],
        name=f"lklab-experiment-{task_id}",
        trigger_rule="none_failed",
        **operator_args,
    )


@dag(
    schedule=None,
    start_date=datetime(2026, 1, 1, tzinfo=UTC),
    catchup=False,
    max_active_runs=1,
    default_args={"owner": "lklab", "retries": 1, "retry_delay": timedelta(minutes=1)},
    params={
        "lake": Param(
            "", type="string", description="the experiment's own lake (absolute path; empty: the default, see above)"
        ),
        "generate": Param(
            True, type="boolean", description="write a fresh scenario log first (false: use the lake's log)"
        ),
        "scenario": Param("billing", enum=["billing", "clickstream", "outage"]),
        "events": Param(100_000, type="integer", minimum=1),
        "seed": Param(7, type="integer"),
        "run_name": Param("experiment", type="string", pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$"),
        "watermark_delay": Param("1m", type="string", pattern=DURATION),
        "allowed_lateness": Param("0s", type="string", pattern=DURATION),
    },
    tags=["lklab", "lambda", "kappa", "experiment", "spark"],
    doc_md=__doc__,
)
def lambda_kappa_experiment():
    @task
    def claim_lake(params=None) -> str:
        """The experiment's lake (``lake``, or the default); refused if the experiment did not
        make it (the configured live one, from the environment or the configuration file, or
        any with data of its own)."""
        from lklab.experiment_lake import claim, default_lake
        from shared.config import load_config

        live = load_config().lake
        return str(claim(params["lake"] or default_lake(live), live))

    @task.run_if(lambda context: context["params"]["generate"], skip_message="using the log already in the lake")
    @task
    def generate_log(lake: str, params=None) -> dict:
        from lklab.pipelines.billing_windows.generator import GeneratorParams, generate

        scenario = GeneratorParams(scenario=params["scenario"], events=params["events"], seed=params["seed"])
        return generate(scenario, lake, overwrite=True).manifest

    log = generate_log(claim_lake())
    speed_layer = spark_step("speed_layer", "speed_job", "--available-now", *STREAM_SETTINGS)
    batch = spark_step("batch_recompute", "batch_job")
    replay = spark_step("kappa_replay", "replay_job", "--name", "{{ params.run_name }}", "--replace", *STREAM_SETTINGS)
    reconcile_speed = spark_step("reconcile_speed", "reconcile_job", "--against", "speed", breach_exit_code=BREACH)
    reconcile_kappa = spark_step(
        "reconcile_kappa", "reconcile_job", "--against", "kappa:{{ params.run_name }}", breach_exit_code=BREACH
    )

    log >> [speed_layer, batch, replay]
    [speed_layer, batch] >> reconcile_speed
    [replay, batch] >> reconcile_kappa


lambda_kappa_experiment()

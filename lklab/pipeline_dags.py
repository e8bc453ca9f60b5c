"""The DAGs of every pipeline (``Pipeline.dags``): one shape each, written once, made for a
pipeline by ``nightly_dag(name)`` or, for a pipeline whose truth is recomputed day by day
(``by_day``: ``billing_windows``), ``truth_dag(name)`` and ``reconcile_dag(name)``; and
``replay_dag(name)``. A DAG's id is ``<pipeline>_<shape>`` unless the pipeline names it
(``dag_ids``: billing's keep their first names, ``batch_recompute``, ``reconciliation``,
``kappa_replay``).

* ``<pipeline>_nightly``, daily at the pipeline's own time (UTC). ``recompute_truth`` runs
  ``spark_jobs/batch_job.py --pipeline P``: the truth over the whole log, replacing the last one
  (no date: a retry or a rerun computes the same tables again). Then ``reconcile`` runs
  ``spark_jobs/reconcile_job.py --pipeline P --against speed``: the always-on stream's tables, as
  of their last committed micro-batch, against that truth. Reconcile exits 3 when a difference
  is unexplained, a *breach*: the task fails at once, without retries, ``BREACH`` and the job's
  verdict in its failure message (``lklab.spark_task``); any other failure is a crash, retried.
* ``<pipeline>_truth``, daily at the pipeline's time: ``recompute_truth`` runs
  ``spark_jobs/batch_job.py --pipeline P --date {{ ds }}``, the truth of the run's logical date
  (a rerun reads the position recorded for that date); its success is an event on the truth's
  assets, which schedules ``<pipeline>_reconcile``: ``days_covered`` lists the days of the
  triggering events, and ``reconcile`` runs ``reconcile_job.py --pipeline P --date DAY --against
  speed --json`` once per day (mapped), a breach failing that day's task at once.
* ``<pipeline>_replay``, manual: ``replay`` runs ``spark_jobs/replay_job.py --pipeline P --name
  RUN`` with the run's stream settings, into the ``kappa/RUN/`` tables, replacing an earlier
  replay of that name; ``lklab reconcile --pipeline P --against kappa:RUN`` compares it.

Every task names its pipeline on its command line: the ``pipeline`` setting of the environment
or the configuration file (``billing_windows`` unless set) never decides what a task runs. The
lake and every other setting are the configured ones, read by the job (``LKLAB_LAKE``,
``LKLAB_CONFIG``), as for the billing DAGs. A DAG file imports this module when it is parsed:
it imports only Airflow's SDK, the assets and the table catalog. The DAG files that call it
import ``airflow.sdk`` themselves: Airflow's safe mode skips a file that never mentions
``airflow``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from airflow.sdk import DAG, Asset, CronDataIntervalTimetable, CronTriggerTimetable, Param, task

from lklab import assets
from lklab.pipelines import REGISTRY, find
from lklab.pipelines.declared.names import BATCH_ROLES, declared_names, table_name
from lklab.spark_task import LabSparkSubmitOperator, mapped_spark_job, spark_job
from shared import catalog

__all__ = ["PipelineDags", "nightly_dag", "replay_dag", "truth_dag", "reconcile_dag", "declared_dags", "BREACH"]

BREACH = 3  # reconcile_job's exit code for these pipelines: a difference is unexplained
START = datetime(2026, 1, 1, tzinfo=UTC)
DECLARED_NIGHTLY_AT = "0 4 * * *"  # a declared pipeline's nightly run, UTC
RUN_NAME = r"^[A-Za-z0-9][A-Za-z0-9_.-]*$"
DURATION = r"^\d+(ms|s|m|h|d)$|^0$"


@dataclass(frozen=True)
class PipelineDags:
    """One pipeline's DAG declaration (``lklab.pipelines.contract.DagSpec``) with its assets."""

    pipeline: str
    computes: str
    nightly_at: str
    truth: tuple[Asset, ...]
    reconciled: tuple[Asset, ...]
    reconcile_writes: str
    batch_tables: tuple[catalog.Table, ...]
    replay_settings: tuple[tuple[str, str], ...]
    replayed: tuple[Asset, ...] = ()
    by_day: bool = False
    dag_ids: tuple[tuple[str, str], ...] = ()

    @classmethod
    def of(cls, name: str) -> PipelineDags:
        """The DAG declaration of the registered pipeline ``name`` (``ValueError`` when it has none)."""
        pipeline = find(name)
        spec = pipeline.dags
        if spec is None:
            raise ValueError(f"the {name} pipeline declares no DAGs")
        return cls(
            pipeline=name,
            computes=pipeline.computes,
            nightly_at=spec.nightly_at,
            truth=tuple(assets.PIPELINE_ASSETS[t.name] for t in spec.truth),
            reconciled=tuple(assets.PIPELINE_ASSETS[t.name] for t in spec.reconciled),
            reconcile_writes=spec.reconcile_writes,
            batch_tables=spec.batch_tables,
            replay_settings=spec.replay_settings,
            replayed=tuple(assets.PIPELINE_ASSETS[t.name] for t in spec.replayed),
            by_day=spec.by_day,
            dag_ids=tuple(spec.dag_ids.items()),
        )

    @classmethod
    def declared(cls, name: str) -> PipelineDags:
        """The DAG declaration of the pipeline ``[pipelines.name]`` declares: its names only
        (``lklab.pipelines.declared.names``), the declaration itself read by its tasks when they
        run. Nightly at 04:00 UTC, after every registered pipeline's and the maintenance; a replay
        takes no settings (a declared stream's are its declaration's)."""
        batch = tuple(catalog.Table(table_name(name, role), f"declared:{name}") for role in BATCH_ROLES)
        return cls(
            pipeline=name,
            computes=f"the windows [pipelines.{name}] declares",
            nightly_at=DECLARED_NIGHTLY_AT,
            truth=(assets.table_asset(batch[0]),),
            reconciled=(),
            reconcile_writes="prints the keyed diff of stream and truth and what explains it (no table)",
            batch_tables=batch,
            replay_settings=(),
        )

    def dag_id(self, shape: str) -> str:
        """The id of the pipeline's DAG of ``shape`` (``nightly``, ``truth``, ``reconcile``, ``replay``)."""
        return dict(self.dag_ids).get(shape, f"{self.pipeline}_{shape}")

    @property
    def selects(self) -> list[str]:
        """The arguments naming the pipeline, first in every task's command line."""
        return ["--pipeline", self.pipeline]


def _spec(pipeline: str | PipelineDags) -> PipelineDags:
    """``pipeline``'s DAG declaration: a registered pipeline's name, or the declaration itself."""
    return pipeline if isinstance(pipeline, PipelineDags) else PipelineDags.of(pipeline)


def declared_dags(environ: Mapping[str, str] | None = None) -> dict[str, DAG]:
    """``<name>_nightly`` and ``<name>_replay`` of every pipeline the configuration file in use
    declares (``lklab.pipelines.declared.names.declared_names``), by DAG id; none for a name a
    registered pipeline has (its commands refuse the file)."""
    dags = {}
    for name in declared_names(environ):
        if name in REGISTRY:
            continue
        spec = PipelineDags.declared(name)
        for dag in (nightly_dag(spec), replay_dag(spec)):
            dags[dag.dag_id] = dag
    return dags


def _at(spec: PipelineDags) -> str:
    minute, hour = spec.nightly_at.split()[:2]
    return f"{int(hour):02d}:{int(minute):02d} UTC"


def _nightly_doc(spec: PipelineDags) -> str:
    return f"""`{spec.dag_id("nightly")}`: {spec.computes}, the truth recomputed from the whole log, then the speed layer reconciled with it.

Daily at {_at(spec)}, one run at a time.

1. `recompute_truth`: `spark_jobs/batch_job.py {" ".join(spec.selects)}` replaces {", ".join(f"`{t.name}`" for t in spec.batch_tables)} from every segment of the log; no date, so a retry or a rerun computes the same tables again.
2. `reconcile`: `spark_jobs/reconcile_job.py {" ".join(spec.selects)} --against speed` compares the speed layer's tables (as of its last committed micro-batch) with that truth, explains each difference by the side outputs, and {spec.reconcile_writes}.

A difference nothing explains makes reconcile exit {BREACH}: a breach, which fails the task at once, without retries, its failure message opening with `BREACH` and quoting the job's verdict. Any other failure is retried (2 retries, 2 minutes apart). The pipeline is named on every command line, whatever the `pipeline` setting says; the lake is the configured one (`LKLAB_LAKE` / `LKLAB_CONFIG`). `lklab.pipeline_dags` makes this DAG.
"""


def _replay_doc(spec: PipelineDags) -> str:
    settings = ", ".join(f"`{name}`" for name, _ in spec.replay_settings)
    return f"""`{spec.dag_id("replay")}`: a Kappa replay of the {spec.pipeline} stream over the whole log, under a name of its own.

Manual. `replay`: `spark_jobs/replay_job.py {" ".join(spec.selects)} --name <run_name> --replace` with the params {settings}, into tables `kappa/<run_name>/...` (replacing an earlier replay of that name, so a retry computes the same tables again). `lklab reconcile {" ".join(spec.selects)} --against kappa:<run_name>` compares it with the truth. `lklab.pipeline_dags` makes this DAG.
"""


def _dag(
    spec: PipelineDags, shape: str, schedule, doc_md: str, kinds: tuple[str, ...], retries: int = 2, **more
) -> DAG:
    """The pipeline's DAG of ``shape``, as every one of them is made: from ``START``, no catch-up,
    owned by ``lklab``, a failed task retried ``retries`` times 2 minutes apart, tagged ``lklab``,
    its ``kinds`` (``lambda``, ``kappa``, ``reconciliation``), ``spark`` and the pipeline; ``more``:
    what this shape adds (``max_active_runs``, ``params``)."""
    return DAG(
        spec.dag_id(shape),
        schedule=schedule,
        start_date=START,
        catchup=False,
        default_args={"owner": "lklab", "retries": retries, "retry_delay": timedelta(minutes=2)},
        tags=["lklab", *kinds, "spark", spec.pipeline],
        doc_md=doc_md,
        **more,
    )


def _recompute_truth(spec: PipelineDags, arguments: list[str]) -> LabSparkSubmitOperator:
    """The ``recompute_truth`` task: ``spark_jobs/batch_job.py`` with ``arguments``, its success an
    event on the truth's assets."""
    return spark_job(
        "recompute_truth",
        "batch_job",
        arguments,
        name=f"lklab-{spec.pipeline}-batch",
        outlets=list(spec.truth),
        execution_timeout=timedelta(hours=2),
    )


def nightly_dag(name: str | PipelineDags) -> DAG:
    """``<name>_nightly``: ``recompute_truth >> reconcile``."""
    spec = _spec(name)
    schedule = CronTriggerTimetable(spec.nightly_at, timezone="UTC")
    # One run at a time: both tasks replace or append to the same tables.
    with _dag(spec, "nightly", schedule, _nightly_doc(spec), ("lambda",), max_active_runs=1) as nightly:
        truth = _recompute_truth(spec, spec.selects)
        reconcile = spark_job(
            "reconcile",
            "reconcile_job",
            [*spec.selects, "--against", "speed"],
            name=f"lklab-{spec.pipeline}-reconcile",
            breach_exit_code=BREACH,
            outlets=list(spec.reconciled),
            execution_timeout=timedelta(hours=1),
        )
        truth >> reconcile
    return nightly


def replay_dag(name: str | PipelineDags) -> DAG:
    """``<name>_replay``: one ``replay`` task, params ``run_name`` and the pipeline's replay settings."""
    spec = _spec(name)
    params = {
        "run_name": Param(
            type="string", pattern=RUN_NAME, description="names the replay's tables: kappa/<run_name>/..."
        )
    }
    settings: list[str] = []
    for name, default in spec.replay_settings:
        param = name.replace("-", "_")
        params[param] = Param(
            default, type="string", pattern=DURATION, description=f"the replay's {name}, e.g. 30s, 5m"
        )
        settings += [f"--{name}", f"{{{{ params.{param} }}}}"]
    with _dag(spec, "replay", None, _replay_doc(spec), ("kappa",), retries=1, params=params) as replay:
        spark_job(
            "replay",
            "replay_job",
            [*spec.selects, "--name", "{{ params.run_name }}", *settings, "--replace"],
            name=f"lklab-{spec.pipeline}-replay",
            outlets=list(spec.replayed),
            execution_timeout=timedelta(hours=4),
        )
    return replay


def _truth_doc(spec: PipelineDags) -> str:
    return f"""`{spec.dag_id("truth")}`: {spec.computes}; the truth, one UTC day per run.

Daily at {_at(spec)}, one run at a time. `recompute_truth`: `spark_jobs/batch_job.py {" ".join(spec.selects)} --date {{{{ ds }}}}` recomputes {", ".join(f"`{t.name}`" for t in spec.batch_tables)} for the run's logical date (the day its data interval starts), through the `spark_default` connection (local Spark, or a standalone cluster when it says `spark://host:7077`). A rerun for the same date reads the log position recorded for that date and replaces that date's rows, so retries and clears are idempotent. Success emits an event on {", ".join(f"`{a.name}`" for a in spec.truth)}, which schedules `{spec.dag_id("reconcile")}`. `lklab.pipeline_dags` makes this DAG.
"""


def _reconcile_doc(spec: PipelineDags) -> str:
    return f"""`{spec.dag_id("reconcile")}`: the speed layer against the {spec.pipeline} truth, for every day a recompute covered.

Scheduled on {", ".join(f"`{a.name}`" for a in spec.truth)}. `days_covered` lists the days of the run's events (``lklab.batch_events``: each event's `days` extra, or the logical date of the run that emitted it; a run without events, manual or `airflow dags test`, covers its own logical date), and `reconcile` runs once per day (dynamic task mapping, one day at a time): `spark_jobs/reconcile_job.py {" ".join(spec.selects)} --date DAY --against speed --json` compares the speed layer's tables (as of its last committed micro-batch) with the truth, explains each difference by the side outputs, {spec.reconcile_writes}, and prints its summary as JSON into the task's log.

A breach, an unexplained gap beyond the `max_unexplained` param (the job exits {BREACH}), fails that day's task at once, without retries, its failure message opening with `BREACH` and quoting the job's verdict: a rerun would find the same gap. A crash (any other failure) is retried. `lklab.pipeline_dags` makes this DAG.
"""


def truth_dag(name: str) -> DAG:
    """``<name>_truth`` (a ``by_day`` pipeline's): ``recompute_truth`` for the run's logical date."""
    spec = _spec(name)
    schedule = CronDataIntervalTimetable(spec.nightly_at, timezone="UTC")
    # One run at a time: runs write the same table, and each run's asset event then reaches the
    # reconcile DAG on its own.
    with _dag(spec, "truth", schedule, _truth_doc(spec), ("lambda",), max_active_runs=1) as truth:
        _recompute_truth(spec, [*spec.selects, "--date", "{{ ds }}"])
    return truth


def reconcile_dag(name: str) -> DAG:
    """``<name>_reconcile`` (a ``by_day`` pipeline's): scheduled on its truth, ``reconcile`` once
    per day the triggering recomputes covered."""
    spec = _spec(name)
    params = {
        "max_unexplained": Param(
            "0",
            type="string",
            pattern=r"^\d+(\.\d+)?$",
            description="largest unexplained difference (money, per currency) before a day's task fails as a breach",
        ),
    }
    kinds = ("lambda", "reconciliation")
    with _dag(
        spec, "reconcile", list(spec.truth), _reconcile_doc(spec), kinds, max_active_runs=1, params=params
    ) as reconcile:
        selects = spec.selects

        @task
        def days_covered(triggering_asset_events=None, dag_run=None, params=None) -> list[list[str]]:
            from lklab.batch_events import days_to_reconcile

            return [
                [*selects, "--date", day.isoformat(), "--against", "speed", "--json"]
                + ["--max-unexplained", params["max_unexplained"]]
                for day in days_to_reconcile(triggering_asset_events, dag_run.logical_date)
            ]

        mapped_spark_job(
            "reconcile",
            "reconcile_job",
            days_covered(),
            name=f"lklab-{spec.pipeline}-reconcile",
            breach_exit_code=BREACH,
            outlets=list(spec.reconciled),
            execution_timeout=timedelta(hours=1),
            max_active_tis_per_dagrun=1,
        )
    return reconcile

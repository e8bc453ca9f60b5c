"""The DAG folder as Airflow parses it: no import errors, each DAG's task graph, retries,
schedules and asset wiring, and every DAG survives serialization (what the DAG processor
stores and the scheduler reads).
"""

from __future__ import annotations

import os
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DAGS = REPO / "dags"

SHAPES = {
    "batch_recompute": {"recompute_batch_truth": set()},
    "reconciliation": {"days_covered": {"reconcile"}, "reconcile": set()},
    "kappa_replay": {"replay": set()},
    "speed_layer_health": {"check_stream_metrics": set()},
    "lake_maintenance": {"compact_and_vacuum": set()},
    "lambda_kappa_experiment": {
        "claim_lake": {"generate_log"},
        "generate_log": {"speed_layer", "batch_recompute", "kappa_replay"},
        "speed_layer": {"reconcile_speed"},
        "batch_recompute": {"reconcile_speed", "reconcile_kappa"},
        "kappa_replay": {"reconcile_kappa"},
        "reconcile_speed": set(),
        "reconcile_kappa": set(),
    },
}
SPARK_JOBS = {
    ("batch_recompute", "recompute_batch_truth"): "batch_job.py",
    ("reconciliation", "reconcile"): "reconcile_job.py",
    ("kappa_replay", "replay"): "replay_job.py",
    ("lambda_kappa_experiment", "speed_layer"): "speed_job.py",
    ("lambda_kappa_experiment", "batch_recompute"): "batch_job.py",
    ("lambda_kappa_experiment", "kappa_replay"): "replay_job.py",
    ("lambda_kappa_experiment", "reconcile_speed"): "reconcile_job.py",
    ("lambda_kappa_experiment", "reconcile_kappa"): "reconcile_job.py",
}


@pytest.fixture(scope="module")
def dagbag(tmp_path_factory):
    """The DAG folder parsed by Airflow, with a scratch AIRFLOW_HOME (config only, no database)."""
    saved = {key: os.environ.get(key) for key in ("AIRFLOW_HOME", "AIRFLOW__CORE__LOAD_EXAMPLES")}
    os.environ["AIRFLOW_HOME"] = str(tmp_path_factory.mktemp("airflow-home"))
    os.environ["AIRFLOW__CORE__LOAD_EXAMPLES"] = "False"
    try:
        from airflow.dag_processing.dagbag import DagBag

        yield DagBag(dag_folder=str(DAGS))
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def test_every_dag_imports_without_errors(dagbag):
    assert dagbag.import_errors == {}
    assert set(dagbag.dag_ids) == set(SHAPES)


@pytest.mark.parametrize("dag_id", sorted(SHAPES))
def test_task_graph(dagbag, dag_id):
    dag = dagbag.dags[dag_id]
    assert {task.task_id: set(task.downstream_task_ids) for task in dag.tasks} == SHAPES[dag_id]


@pytest.mark.parametrize("dag_id", sorted(SHAPES))
def test_retries_owner_and_tags(dagbag, dag_id):
    dag = dagbag.dags[dag_id]
    assert "lklab" in dag.tags
    assert dag.catchup is False
    for task in dag.tasks:
        assert task.owner == "lklab"
        assert task.retries >= 1, f"{dag_id}.{task.task_id} has no retries"
        assert task.retry_delay >= timedelta(seconds=30)


def test_schedules(dagbag):
    from airflow.sdk import CronDataIntervalTimetable, CronTriggerTimetable
    from airflow.sdk.definitions.asset import AssetAll

    from lklab.assets import batch_truth

    batch = dagbag.dags["batch_recompute"].timetable
    assert isinstance(batch, CronDataIntervalTimetable)
    assert (batch.expression, str(batch.timezone)) == ("0 0 * * *", "UTC")
    assert dagbag.dags["reconciliation"].timetable.asset_condition == AssetAll(batch_truth)
    health = dagbag.dags["speed_layer_health"].timetable
    assert isinstance(health, CronTriggerTimetable) and health.expression == "*/5 * * * *"
    maintenance = dagbag.dags["lake_maintenance"].timetable
    assert isinstance(maintenance, CronTriggerTimetable)
    assert (maintenance.expression, str(maintenance.timezone)) == ("0 3 * * *", "UTC")
    assert dagbag.dags["lake_maintenance"].params["retention"] == "7d"
    for manual in ("kappa_replay", "lambda_kappa_experiment"):
        assert dagbag.dags[manual].timetable.can_be_scheduled is False
    for one_at_a_time in ("batch_recompute", "reconciliation", "speed_layer_health", "lambda_kappa_experiment", "lake_maintenance"):
        assert dagbag.dags[one_at_a_time].max_active_runs == 1


def test_assets_wire_batch_truth_to_reconciliation(dagbag):
    """The serialized dependencies, as the scheduler sees them."""
    from airflow.serialization.serialized_objects import DagSerialization

    edges = set()
    for dag_id in SHAPES:
        serialized = DagSerialization.from_dict(DagSerialization.to_dict(dagbag.dags[dag_id]))
        edges |= {(d["source"], d["target"], d["label"]) for d in serialized.dag_dependencies}
    assert edges == {
        ("batch_recompute", "asset", "batch_truth"),
        ("asset", "reconciliation", "batch_truth"),
        ("reconciliation", "asset", "recon_runs"),
        ("kappa_replay", "asset", "replay_runs"),
    }


def test_assets_are_the_lab_tables_by_name_and_uri(dagbag):
    """Each asset a DAG produces or is scheduled on is ``lklab.assets``' one for its table."""
    from airflow.sdk import Asset

    from lklab import assets

    declared = {getattr(assets, name) for name in assets.__all__ if isinstance(getattr(assets, name), Asset)}
    assert {(a.name, a.uri) for a in declared} == {
        ("batch_truth", "x-lklab://tables/batch_truth"),
        ("recon_runs", "x-lklab://tables/recon_runs"),
        ("replay_runs", "x-lklab://tables/replay_runs"),
    }
    used = {outlet for dag in dagbag.dags.values() for task in dag.tasks for outlet in _outlets(task)}
    used |= set(dagbag.dags["reconciliation"].timetable.asset_condition.objects)
    assert used == declared


def _outlets(task) -> list:
    from airflow.sdk.definitions.mappedoperator import MappedOperator

    return task.partial_kwargs.get("outlets", []) if isinstance(task, MappedOperator) else task.outlets


def spark_task_arguments(task) -> dict:
    """The arguments a Spark task was given (a mapped task's are its ``partial`` ones)."""
    from airflow.sdk.definitions.mappedoperator import MappedOperator

    from lklab.spark_task import LabSparkSubmitOperator

    if isinstance(task, MappedOperator):
        assert task.operator_class is LabSparkSubmitOperator
        return dict(task.partial_kwargs)
    assert isinstance(task, LabSparkSubmitOperator)
    return {"application": task.application, "conn_id": task._conn_id, "driver_memory": task._driver_memory,
            "spark_binary": task._spark_binary, "breach_exit_code": task.breach_exit_code, "env_vars": task.env_vars,
            "conf": task.conf}


@pytest.mark.parametrize(("dag_id", "task_id"), sorted(SPARK_JOBS))
def test_spark_tasks_submit_repo_jobs_with_the_projects_spark_submit(dagbag, dag_id, task_id):
    import sys

    arguments = spark_task_arguments(dagbag.dags[dag_id].get_task(task_id))
    assert arguments["conn_id"] == "spark_default"
    # The venv's own, wherever PATH points: the Spark the jobs import.
    assert arguments["spark_binary"] == str(Path(sys.executable).parent / "spark-submit")
    assert arguments["conf"] == {"spark.pyspark.python": sys.executable}
    assert arguments["env_vars"] == {"PYSPARK_DRIVER_PYTHON": sys.executable}
    # Spark's 1g default runs a local-mode reconcile of ~1M windows out of heap.
    assert arguments["driver_memory"] == os.environ.get("LKLAB_DRIVER_MEMORY", "4g")
    assert Path(arguments["application"]) == REPO / "spark_jobs" / SPARK_JOBS[(dag_id, task_id)]
    assert Path(arguments["application"]).is_file(), f"{arguments['application']} does not exist"
    # Only reconcile_job says "ran and found a breach" by its exit code (3); every other failure is retried.
    assert arguments.get("breach_exit_code") == (3 if SPARK_JOBS[(dag_id, task_id)] == "reconcile_job.py" else None)


def test_reconciliation_maps_one_reconcile_over_the_days_covered_one_at_a_time(dagbag):
    from airflow.sdk.definitions.mappedoperator import MappedOperator

    reconcile = dagbag.dags["reconciliation"].get_task("reconcile")
    assert isinstance(reconcile, MappedOperator)
    assert set(reconcile.expand_input.value) == {"application_args"}
    assert reconcile.partial_kwargs["max_active_tis_per_dagrun"] == 1
    assert [t.task_id for t in reconcile.upstream_list] == ["days_covered"]


def test_days_covered_gives_each_day_its_reconcile_arguments(dagbag):
    from types import SimpleNamespace

    days_covered = dagbag.dags["reconciliation"].get_task("days_covered").python_callable
    manual_run = SimpleNamespace(logical_date=datetime(2026, 1, 5, tzinfo=timezone.utc))
    assert days_covered(triggering_asset_events={}, dag_run=manual_run, params={"max_unexplained": "0.5"}) == [
        ["--date", "2026-01-05", "--against", "speed", "--json", "--max-unexplained", "0.5"],
    ]
    assert dagbag.dags["reconciliation"].params["max_unexplained"] == "0"


def test_templated_arguments(dagbag):
    args = lambda dag_id, task_id: dagbag.dags[dag_id].get_task(task_id).application_args
    assert args("batch_recompute", "recompute_batch_truth") == ["--date", "{{ ds }}"]
    assert args("kappa_replay", "replay") == [
        "--name", "{{ params.run_name }}",
        "--watermark-delay", "{{ params.watermark_delay }}",
        "--allowed-lateness", "{{ params.allowed_lateness }}",
        "--replace",
    ]
    params = dagbag.dags["kappa_replay"].params
    assert (params["watermark_delay"], params["allowed_lateness"]) == ("1m", "0s")

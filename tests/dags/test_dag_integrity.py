"""The DAG folder as Airflow parses it: no import errors, each DAG's task graph, retries,
schedules and asset wiring, and every DAG survives serialization (what the DAG processor
stores and the scheduler reads).

A DAG file is parsed again and again: each parses in well under a second, in a fresh
interpreter, without importing Spark, Arrow, NumPy, pandas, delta-rs or the lab's
configuration, and a broken configuration file breaks no DAG's import (it fails the task that
reads it, when it runs).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DAGS = REPO / "dags"
DAG_FILES = sorted(DAGS.glob("*.py"))
# What a DAG file must not import when it is parsed: tasks import them when they run.
HEAVY_MODULES = {"pyspark", "pyarrow", "numpy", "pandas", "deltalake", "delta", "polars", "matplotlib", "shared.config"}
PARSE_CPU_SECONDS = 0.5
BROKEN_CONFIG = 'window-size = "2m"\nthis is not TOML\n'

SHAPES = {
    "batch_recompute": {"recompute_truth": set()},
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
    "unique_visitors_nightly": {"recompute_truth": {"reconcile"}, "reconcile": set()},
    "order_payments_nightly": {"recompute_truth": {"reconcile"}, "reconcile": set()},
    "unique_visitors_replay": {"replay": set()},
    "order_payments_replay": {"replay": set()},
    "running_max_nightly": {"recompute_truth": {"reconcile"}, "reconcile": set()},
    "running_max_replay": {"replay": set()},
}
FILE_NAMES = {"reconciliation": "reconciliation_days.py"}
SPARK_JOBS = {
    ("batch_recompute", "recompute_truth"): "batch_job.py",
    ("reconciliation", "reconcile"): "reconcile_job.py",
    ("kappa_replay", "replay"): "replay_job.py",
    ("lambda_kappa_experiment", "speed_layer"): "speed_job.py",
    ("lambda_kappa_experiment", "batch_recompute"): "batch_job.py",
    ("lambda_kappa_experiment", "kappa_replay"): "replay_job.py",
    ("lambda_kappa_experiment", "reconcile_speed"): "reconcile_job.py",
    ("lambda_kappa_experiment", "reconcile_kappa"): "reconcile_job.py",
    ("unique_visitors_nightly", "recompute_truth"): "batch_job.py",
    ("unique_visitors_nightly", "reconcile"): "reconcile_job.py",
    ("order_payments_nightly", "recompute_truth"): "batch_job.py",
    ("order_payments_nightly", "reconcile"): "reconcile_job.py",
    ("unique_visitors_replay", "replay"): "replay_job.py",
    ("order_payments_replay", "replay"): "replay_job.py",
    ("running_max_nightly", "recompute_truth"): "batch_job.py",
    ("running_max_nightly", "reconcile"): "reconcile_job.py",
    ("running_max_replay", "replay"): "replay_job.py",
}
# The newer pipelines' tasks: each names its pipeline first, whatever the ``pipeline`` setting says.
PIPELINE_ARGUMENTS = {
    ("unique_visitors_nightly", "recompute_truth"): ["--pipeline", "unique_visitors"],
    ("unique_visitors_nightly", "reconcile"): ["--pipeline", "unique_visitors", "--against", "speed"],
    ("order_payments_nightly", "recompute_truth"): ["--pipeline", "order_payments"],
    ("order_payments_nightly", "reconcile"): ["--pipeline", "order_payments", "--against", "speed"],
    ("unique_visitors_replay", "replay"): [
        "--pipeline",
        "unique_visitors",
        "--name",
        "{{ params.run_name }}",
        "--watermark-delay",
        "{{ params.watermark_delay }}",
        "--allowed-lateness",
        "{{ params.allowed_lateness }}",
        "--replace",
    ],
    ("order_payments_replay", "replay"): [
        "--pipeline",
        "order_payments",
        "--name",
        "{{ params.run_name }}",
        "--watermark-delay",
        "{{ params.watermark_delay }}",
        "--allowed-lateness",
        "{{ params.allowed_lateness }}",
        "--replace",
    ],
    ("running_max_nightly", "recompute_truth"): ["--pipeline", "running_max"],
    ("running_max_nightly", "reconcile"): ["--pipeline", "running_max", "--against", "speed"],
    # its stream has no settings of its own: a replay takes only its name
    ("running_max_replay", "replay"): ["--pipeline", "running_max", "--name", "{{ params.run_name }}", "--replace"],
}


@pytest.fixture(scope="module")
def airflow_home(tmp_path_factory):
    """A scratch AIRFLOW_HOME (config only, no database) for this module's parses."""
    saved = {key: os.environ.get(key) for key in ("AIRFLOW_HOME", "AIRFLOW__CORE__LOAD_EXAMPLES")}
    os.environ["AIRFLOW_HOME"] = str(tmp_path_factory.mktemp("airflow-home"))
    os.environ["AIRFLOW__CORE__LOAD_EXAMPLES"] = "False"
    try:
        yield Path(os.environ["AIRFLOW_HOME"])
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@pytest.fixture(scope="module")
def dagbag(airflow_home):
    """The DAG folder parsed by Airflow."""
    from airflow.dag_processing.dagbag import DagBag

    return DagBag(dag_folder=str(DAGS))


@pytest.fixture(scope="module")
def broken_config(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("config") / "lklab.toml"
    path.write_text(BROKEN_CONFIG)
    return path


def test_every_dag_imports_without_errors(dagbag):
    assert dagbag.import_errors == {}
    assert set(dagbag.dag_ids) == set(SHAPES)


def test_a_broken_configuration_breaks_no_dag_import(airflow_home, broken_config, monkeypatch):
    from airflow.dag_processing.dagbag import DagBag

    from shared.config import ConfigError, load_config

    monkeypatch.setenv("LKLAB_CONFIG", str(broken_config))
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config()
    broken = DagBag(dag_folder=str(DAGS))
    assert broken.import_errors == {}
    assert set(broken.dag_ids) == set(SHAPES)


# In a fresh interpreter (this one has imported everything already) that imports airflow.sdk,
# then forks a child to import each DAG file, as Airflow's DAG processor does.
PARSE_EACH_FILE = """
import importlib.util, json, os, sys, time, traceback
import airflow.sdk

def parse(path):
    wall, cpu = time.perf_counter(), time.process_time()
    spec = importlib.util.spec_from_file_location("lklab_dag_file", path)
    spec.loader.exec_module(importlib.util.module_from_spec(spec))
    return {"wall": time.perf_counter() - wall, "cpu": time.process_time() - cpu, "modules": sorted(sys.modules)}

for path in sys.argv[1:]:
    read, write = os.pipe()
    child = os.fork()
    if child == 0:
        os.close(read)
        try:
            result = {"file": path, **parse(path)}
        except BaseException:
            result = {"file": path, "error": traceback.format_exc()}
        with os.fdopen(write, "w") as out:
            json.dump(result, out)
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as answer:
        print(answer.read())
    os.waitpid(child, 0)
"""


@pytest.fixture(scope="module")
def parses(airflow_home, broken_config) -> dict[str, dict]:
    """Each DAG file imported alone (see ``PARSE_EACH_FILE``) with a broken configuration file:
    ``{file name: {"wall": s, "cpu": s, "modules": [...]}}``."""
    env = {
        **os.environ,
        "LKLAB_CONFIG": str(broken_config),
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
    }
    done = subprocess.run(
        [sys.executable, "-c", PARSE_EACH_FILE, *map(str, DAG_FILES)],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    results = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    errors = {Path(r["file"]).name: r["error"] for r in results if "error" in r}
    assert not errors, f"DAG files that do not import: {errors}"
    return {Path(r["file"]).name: r for r in results}


def test_dag_files_parse_in_well_under_a_second(parses, capsys):
    with capsys.disabled():
        print()
        for name, parse in parses.items():
            print(f"parse {name}: {parse['wall']:.3f}s wall, {parse['cpu']:.3f}s CPU")
    # each file is named after its DAG, but the one whose name would shadow the reconciliation
    # package, and the one making the declared pipelines' DAGs (their ids are the configuration's)
    assert set(parses) == {FILE_NAMES.get(dag_id, f"{dag_id}.py") for dag_id in SHAPES} | {"declared_pipelines.py"}
    # CPU time, not wall time: on a busy machine the wall clock also counts other processes' turns.
    slow = {name: round(parse["cpu"], 3) for name, parse in parses.items() if parse["cpu"] >= PARSE_CPU_SECONDS}
    assert not slow, f"DAG files taking {PARSE_CPU_SECONDS}s of CPU or more to parse: {slow}"


def test_dag_files_import_no_heavy_module_when_parsed(parses):
    imported = {
        name: sorted(
            m for m in HEAVY_MODULES if any(module == m or module.startswith(m + ".") for module in parse["modules"])
        )
        for name, parse in parses.items()
    }
    assert imported == {name: [] for name in parses}


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
    # The newer pipelines' nightly runs: after billing's batch (00:00), before maintenance (03:00), an hour apart.
    for dag_id, expression in (
        ("unique_visitors_nightly", "0 1 * * *"),
        ("order_payments_nightly", "0 2 * * *"),
        ("running_max_nightly", "30 2 * * *"),
    ):
        nightly = dagbag.dags[dag_id].timetable
        assert isinstance(nightly, CronTriggerTimetable)
        assert (nightly.expression, str(nightly.timezone)) == (expression, "UTC")
    for manual in (
        "kappa_replay",
        "lambda_kappa_experiment",
        "unique_visitors_replay",
        "order_payments_replay",
        "running_max_replay",
    ):
        assert dagbag.dags[manual].timetable.can_be_scheduled is False
    for one_at_a_time in (
        "batch_recompute",
        "reconciliation",
        "speed_layer_health",
        "lambda_kappa_experiment",
        "lake_maintenance",
        "unique_visitors_nightly",
        "order_payments_nightly",
        "running_max_nightly",
    ):
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
        ("unique_visitors_nightly", "asset", "visitors_truth"),
        ("unique_visitors_nightly", "asset", "visitors_corrected"),
        ("order_payments_nightly", "asset", "payments_truth_matched"),
        ("order_payments_nightly", "asset", "payments_truth_unpaid"),
        ("order_payments_nightly", "asset", "payments_truth_orphans"),
        ("running_max_nightly", "asset", "max_truth"),
    }


def test_assets_are_the_lab_tables_by_name_and_uri(dagbag):
    """Each asset a DAG produces or is scheduled on is ``lklab.assets``' one for its table."""
    from airflow.sdk import Asset

    from lklab import assets

    declared = {getattr(assets, name) for name in assets.__all__ if isinstance(getattr(assets, name), Asset)}
    declared |= set(assets.PIPELINE_ASSETS.values())
    assert {(a.name, a.uri) for a in declared} == {
        ("batch_truth", "x-lklab://tables/batch_truth"),
        ("recon_runs", "x-lklab://tables/recon_runs"),
        ("replay_runs", "x-lklab://tables/replay_runs"),
        ("visitors_truth", "x-lklab://tables/visitors_truth"),
        ("visitors_corrected", "x-lklab://tables/visitors_corrected"),
        ("payments_truth_matched", "x-lklab://tables/payments_truth_matched"),
        ("payments_truth_unpaid", "x-lklab://tables/payments_truth_unpaid"),
        ("payments_truth_orphans", "x-lklab://tables/payments_truth_orphans"),
        ("max_truth", "x-lklab://tables/max_truth"),
    }
    used = {outlet for dag in dagbag.dags.values() for task in dag.tasks for outlet in _outlets(task)}
    used |= set(dagbag.dags["reconciliation"].timetable.asset_condition.objects)
    assert used == declared


def _outlets(task) -> list:
    from airflow.sdk.definitions.mappedoperator import MappedOperator

    return task.partial_kwargs.get("outlets", []) if isinstance(task, MappedOperator) else task.outlets


def runnable(task):
    """The operator that runs: a mapped task's as it is unmapped for one element."""
    from airflow.sdk.definitions.mappedoperator import MappedOperator

    from lklab.spark_task import LabSparkSubmitOperator

    if isinstance(task, MappedOperator):
        assert task.operator_class is LabSparkSubmitOperator
        task = task.unmap({"application_args": ["--date", "2026-01-05"]})
    assert isinstance(task, LabSparkSubmitOperator)
    return task


def spark_task_arguments(task) -> dict:
    """The arguments a Spark task runs with; the driver memory is the one its hook gets when it
    runs (the lab's setting, read then)."""
    task = runnable(task)
    return {
        "application": task.application,
        "conn_id": task._conn_id,
        "driver_memory": task._get_hook()._driver_memory,
        "spark_binary": task._spark_binary,
        "breach_exit_code": task.breach_exit_code,
        "env_vars": task.env_vars,
        "conf": task.conf,
    }


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


@pytest.mark.parametrize(("dag_id", "task_id"), sorted(SPARK_JOBS))
def test_spark_tasks_read_the_configuration_when_they_run(dagbag, broken_config, monkeypatch, dag_id, task_id):
    """Parsed, a task holds no setting of the lab's; run with a broken configuration, it fails."""
    from shared.config import ConfigError

    task = runnable(dagbag.dags[dag_id].get_task(task_id))
    assert task._driver_memory is None
    monkeypatch.setenv("LKLAB_CONFIG", str(broken_config))
    with pytest.raises(ConfigError, match="not valid TOML"):
        task._get_hook()


C1 = "-XX:TieredStopAtLevel=1"


def submitted_env(task) -> dict | None:
    """The environment the task's ``spark-submit`` is given (on top of the worker's), as its hook
    builds the command when the task runs."""
    hook = task._get_hook()
    hook._build_spark_submit_command(task.application)
    return hook._env


def lab_task(job: str, arguments: list[str], **settings):
    """A task as a DAG file makes it (``lklab.spark_task.spark_job``), with its arguments as they
    are once rendered and ``settings`` (``env_vars``, ``conf``) added to the lab's own."""
    import sys

    from lklab.spark_task import spark_job

    env_vars = {"PYSPARK_DRIVER_PYTHON": sys.executable, **settings.get("env_vars", {})}
    conf = {"spark.pyspark.python": sys.executable, **settings.get("conf", {})}
    return spark_job(job, job, arguments, env_vars=env_vars, conf=conf)


RECONCILE_DAY = ["--pipeline", "billing_windows", "--date", "2026-01-05", "--against", "speed"]


@pytest.mark.parametrize(
    "worker, task_env, conf, added",
    [
        (None, {}, {}, C1),  # nothing set: the option alone
        ("-XX:+UseSerialGC", {}, {}, f"-XX:+UseSerialGC {C1}"),  # after the worker's options
        ("-XX:+UseSerialGC", {"SPARK_SUBMIT_OPTS": "-Xss4m"}, {}, f"-Xss4m {C1}"),  # the task's replace them
        ("-XX:TieredStopAtLevel=4", {}, {}, None),  # the worker's tier is kept
        (None, {"JAVA_TOOL_OPTIONS": "-XX:TieredStopAtLevel=4"}, {}, None),  # so is the task's
        (None, {}, {"spark.driver.extraJavaOptions": "-XX:-TieredCompilation"}, None),  # and the driver's
    ],
)
def test_a_reconcile_tasks_driver_stops_at_c1_unless_told_its_jit(monkeypatch, worker, task_env, conf, added):
    """Decided when the task runs (its hook), as ``lklab reconcile`` decides for its own JVM."""
    import sys

    task = lab_task("reconcile_job", RECONCILE_DAY, env_vars=task_env, conf=conf)
    monkeypatch.delenv("JAVA_TOOL_OPTIONS", raising=False)
    if worker is None:
        monkeypatch.delenv("SPARK_SUBMIT_OPTS", raising=False)
    else:
        monkeypatch.setenv("SPARK_SUBMIT_OPTS", worker)
    expected = {"PYSPARK_DRIVER_PYTHON": sys.executable, **task_env} | ({"SPARK_SUBMIT_OPTS": added} if added else {})
    assert submitted_env(task) == expected
    assert task.env_vars == {"PYSPARK_DRIVER_PYTHON": sys.executable, **task_env}  # the task's own are kept


def test_the_dags_reconcile_task_makes_the_same_choice(dagbag, monkeypatch):
    import sys

    monkeypatch.delenv("JAVA_TOOL_OPTIONS", raising=False)
    monkeypatch.delenv("SPARK_SUBMIT_OPTS", raising=False)
    task = runnable(dagbag.dags["reconciliation"].get_task("reconcile"))
    assert submitted_env(task) == {"PYSPARK_DRIVER_PYTHON": sys.executable, "SPARK_SUBMIT_OPTS": C1}


def test_a_driver_spark_submit_does_not_start_here_gets_no_jit_setting(monkeypatch):
    """On YARN (or Kubernetes, or a standalone cluster's deploy mode) the driver is not the JVM
    this ``spark-submit`` starts: the environment is passed on as the provider passes it, unchanged."""
    import json
    import sys

    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", json.dumps({"conn_type": "spark", "host": "yarn"}))
    monkeypatch.delenv("SPARK_SUBMIT_OPTS", raising=False)
    monkeypatch.delenv("JAVA_TOOL_OPTIONS", raising=False)
    task = lab_task("reconcile_job", RECONCILE_DAY)
    hook = task._get_hook()
    command = hook._build_spark_submit_command(task.application)
    assert hook._connection["master"] == "yarn" and hook._env == {"PYSPARK_DRIVER_PYTHON": sys.executable}
    assert not [part for part in command if "Tiered" in part or "SPARK_SUBMIT_OPTS" in part], command


@pytest.mark.parametrize(
    "job, arguments",
    [
        ("batch_job", ["--pipeline", "billing_windows", "--date", "2026-01-05"]),
        ("replay_job", ["--pipeline", "unique_visitors", "--name", "r1", "--replace"]),
    ],
)
@pytest.mark.parametrize(
    "log_bytes, lake_given, c1", [(10, "env", True), (10, "flag", True), (64 * 2**20, "env", False)]
)
def test_a_batch_or_replay_tasks_driver_stops_at_c1_while_its_lakes_log_is_small(
    monkeypatch, tmp_path, job, arguments, log_bytes, lake_given, c1
):
    """The lake the job's arguments name (``--lake``, else the configuration), measured when the
    task runs; no lake there, or arguments the job refuses: the JVM's default."""
    import sys

    from shared.eventlog import EventLog

    lake = tmp_path / "lake"
    (lake / "log").mkdir(parents=True)
    with open(EventLog(lake).segment_path(1), "wb") as segment:
        segment.truncate(log_bytes)  # sparse
    monkeypatch.delenv("JAVA_TOOL_OPTIONS", raising=False)
    monkeypatch.setenv("SPARK_SUBMIT_OPTS", "-XX:+UseSerialGC")
    monkeypatch.setenv("LKLAB_LAKE", str(lake if lake_given == "env" else tmp_path / "elsewhere"))
    default = {"PYSPARK_DRIVER_PYTHON": sys.executable}
    chosen = default | {"SPARK_SUBMIT_OPTS": f"-XX:+UseSerialGC {C1}"}
    given = arguments + (["--lake", str(lake)] if lake_given == "flag" else [])
    assert submitted_env(lab_task(job, given)) == (chosen if c1 else default)
    assert submitted_env(lab_task(job, [*arguments, "--lake", str(tmp_path / "no-such-lake")])) == default
    assert submitted_env(lab_task(job, [*arguments, "--window-size", "fast"])) == default


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
    manual_run = SimpleNamespace(logical_date=datetime(2026, 1, 5, tzinfo=UTC))
    assert days_covered(triggering_asset_events={}, dag_run=manual_run, params={"max_unexplained": "0.5"}) == [
        ["--pipeline", "billing_windows", "--date", "2026-01-05", "--against", "speed", "--json"]
        + ["--max-unexplained", "0.5"],
    ]
    assert dagbag.dags["reconciliation"].params["max_unexplained"] == "0"


def test_templated_arguments(dagbag):
    args = lambda dag_id, task_id: dagbag.dags[dag_id].get_task(task_id).application_args
    # every task names its pipeline: the configured one never decides what runs
    assert args("batch_recompute", "recompute_truth") == ["--pipeline", "billing_windows", "--date", "{{ ds }}"]
    assert args("kappa_replay", "replay") == [
        "--pipeline",
        "billing_windows",
        "--name",
        "{{ params.run_name }}",
        "--watermark-delay",
        "{{ params.watermark_delay }}",
        "--allowed-lateness",
        "{{ params.allowed_lateness }}",
        "--replace",
    ]
    params = dagbag.dags["kappa_replay"].params
    assert (params["watermark_delay"], params["allowed_lateness"]) == ("1m", "0s")


@pytest.mark.parametrize(("dag_id", "task_id"), sorted(PIPELINE_ARGUMENTS))
def test_pipeline_tasks_pass_their_pipeline_and_exact_arguments(dagbag, dag_id, task_id):
    assert dagbag.dags[dag_id].get_task(task_id).application_args == PIPELINE_ARGUMENTS[(dag_id, task_id)]


def test_pipeline_task_outlets_are_their_tables(dagbag):
    outlets = {
        (dag_id, task.task_id): [a.name for a in task.outlets]
        for dag_id in (
            "unique_visitors_nightly",
            "order_payments_nightly",
            "unique_visitors_replay",
            "order_payments_replay",
            "running_max_nightly",
            "running_max_replay",
        )
        for task in dagbag.dags[dag_id].tasks
    }
    assert outlets == {
        ("unique_visitors_nightly", "recompute_truth"): ["visitors_truth"],
        ("unique_visitors_nightly", "reconcile"): ["visitors_corrected"],
        ("order_payments_nightly", "recompute_truth"): [
            "payments_truth_matched",
            "payments_truth_unpaid",
            "payments_truth_orphans",
        ],
        ("order_payments_nightly", "reconcile"): [],  # it writes a CSV report, no table
        # A replay's tables are named by its run: no asset stands for them.
        ("unique_visitors_replay", "replay"): [],
        ("order_payments_replay", "replay"): [],
        ("running_max_nightly", "recompute_truth"): ["max_truth"],
        ("running_max_nightly", "reconcile"): [],  # it prints its diff, no table
        ("running_max_replay", "replay"): [],
    }


def test_pipeline_nightly_dags_retry_a_crash_twice(dagbag):
    for dag_id in ("unique_visitors_nightly", "order_payments_nightly", "running_max_nightly"):
        for task in dagbag.dags[dag_id].tasks:
            assert (task.retries, task.retry_delay) == (2, timedelta(minutes=2)), f"{dag_id}.{task.task_id}"


def test_pipeline_replay_params_default_to_the_labs_settings(dagbag):
    from shared.config import LabConfig

    settings = LabConfig().describe()
    visitors, payments = dagbag.dags["unique_visitors_replay"].params, dagbag.dags["order_payments_replay"].params
    assert set(visitors) == {"run_name", "watermark_delay", "allowed_lateness"}
    assert set(payments) == set(visitors) == {"run_name", "watermark_delay", "allowed_lateness"}
    for params in (visitors, payments):
        assert (params["watermark_delay"], params["allowed_lateness"]) == (
            settings["watermark-delay"],
            settings["allowed-lateness"],
        )


def test_pipeline_dag_docs_show_the_commands_they_run(dagbag):
    doc = lambda dag_id: dagbag.dags[dag_id].doc_md
    for pipeline in ("unique_visitors", "order_payments"):
        assert doc(f"{pipeline}_nightly").startswith(f"`{pipeline}_nightly`: ")
        assert f"`spark_jobs/batch_job.py --pipeline {pipeline}`" in doc(f"{pipeline}_nightly")
        assert f"`spark_jobs/reconcile_job.py --pipeline {pipeline} --against speed`" in doc(f"{pipeline}_nightly")
        assert doc(f"{pipeline}_replay").startswith(f"`{pipeline}_replay`: ")
        assert f"`spark_jobs/replay_job.py --pipeline {pipeline} --name <run_name> --replace`" in doc(
            f"{pipeline}_replay"
        )


def test_the_experiment_takes_its_lake_from_claim_lake_when_it_runs(dagbag):
    """Parsed, the experiment holds no lake: ``claim_lake`` reads the default (the environment,
    the configuration) when the run starts, and every Spark step runs on the lake it claimed."""
    dag = dagbag.dags["lambda_kappa_experiment"]
    assert dag.params["lake"] == ""
    for task_id in ("speed_layer", "batch_recompute", "kappa_replay", "reconcile_speed", "reconcile_kappa"):
        assert dag.get_task(task_id).application_args[:2] == ["--lake", "{{ ti.xcom_pull(task_ids='claim_lake') }}"]


def test_no_dag_file_shadows_a_package_of_the_lab():
    """Airflow puts the DAG folder first on the import path of the processes that parse it: a DAG
    file named like one of the lab's packages (``dags/reconciliation.py``) would be imported in its
    place by every DAG that imports that package, directly or through ``lklab``."""
    packages = {path.parent.name for path in REPO.glob("*/__init__.py")}
    assert "reconciliation" in packages and not {path.stem for path in DAG_FILES} & packages


MY_CONFIG = """
[pipelines.meter_kwh]
kind = "windowed"
event-id = "reading_id"
event-time = "read_at"
keys = ["meter"]
window-size = "5m"

[pipelines.running_max]   # a registered pipeline's name: its commands refuse the file
kind = "windowed"
event-id = "id"
event-time = "t"
keys = ["k"]
window-size = "5m"

[pipelines.unique_visitors]   # settings of a registered pipeline, no kind: it declares nothing
watermark-delay = "2m"
"""


def test_a_declared_pipeline_gets_a_nightly_and_a_replay_dag_from_the_configuration(
    airflow_home, tmp_path, monkeypatch
):
    """``dags/declared_pipelines.py`` makes ``<name>_nightly`` and ``<name>_replay`` for each
    pipeline the configuration file declares, from its name alone; they survive serialization."""
    from airflow.dag_processing.dagbag import DagBag
    from airflow.sdk import CronTriggerTimetable
    from airflow.serialization.serialized_objects import DagSerialization

    config = tmp_path / "lklab.toml"
    config.write_text(MY_CONFIG)
    monkeypatch.setenv("LKLAB_CONFIG", str(config))
    bag = DagBag(dag_folder=str(DAGS))
    assert bag.import_errors == {}
    assert set(bag.dag_ids) == set(SHAPES) | {"meter_kwh_nightly", "meter_kwh_replay"}
    nightly, replay = bag.dags["meter_kwh_nightly"], bag.dags["meter_kwh_replay"]
    assert {t.task_id: t.downstream_task_ids for t in nightly.tasks} == {
        "recompute_truth": {"reconcile"},
        "reconcile": set(),
    }
    assert [t.task_id for t in replay.tasks] == ["replay"]
    assert nightly.get_task("recompute_truth").application_args == ["--pipeline", "meter_kwh"]
    assert nightly.get_task("reconcile").application_args == ["--pipeline", "meter_kwh", "--against", "speed"]
    assert replay.get_task("replay").application_args == [
        "--pipeline",
        "meter_kwh",
        "--name",
        "{{ params.run_name }}",
        "--replace",
    ]
    assert set(replay.params) == {"run_name"}  # its stream's settings are its declaration's
    assert [a.name for a in nightly.get_task("recompute_truth").outlets] == ["meter_kwh_truth"]
    assert isinstance(nightly.timetable, CronTriggerTimetable) and nightly.timetable.expression == "0 4 * * *"
    assert nightly.max_active_runs == 1 and replay.timetable.can_be_scheduled is False
    assert "`spark_jobs/batch_job.py --pipeline meter_kwh` replaces `meter_kwh_truth`" in nightly.doc_md
    for dag in (nightly, replay):
        assert DagSerialization.from_dict(DagSerialization.to_dict(dag)).dag_id == dag.dag_id

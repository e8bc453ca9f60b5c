"""A Spark standalone cluster runs the batch job submitted through Airflow's ``spark_default``.

The master and two one-core workers are the pip installation's own ``spark-class`` processes
(what the compose file's ``spark-master`` and ``spark-worker-*`` services run). The
``batch_recompute`` DAG runs for real (``airflow dags test``) with
``AIRFLOW_CONN_SPARK_DEFAULT=spark://127.0.0.1:<port>``; its ``batch_truth`` must equal a local
run of the same job (``run_batch`` in the test's own ``local[2]`` session) on a copy of the same
lake, and both workers must have run executors of the application.
"""

from __future__ import annotations

import json
import os
import urllib.request
from datetime import UTC, datetime, timedelta

import pytest
from deltalake import DeltaTable

from lklab.pipelines.billing_windows.agreement import BOOKKEEPING
from lklab.pipelines.billing_windows.batch import run_batch
from shared.config import LabConfig
from shared.partitions import DayRange
from tests.conftest import SHORT_JVM_OPTIONS
from tests.processes import (
    VENV_BIN,
    airflow_env,
    airflow_home,
    copy_lake,
    free_port,
    run,
    spark_submit,
    speed_layer_lake,
    start,
    stop_all,
    venv_env,
    wait_until,
)

pytestmark = pytest.mark.slow
DAY = (datetime.now(UTC) - timedelta(days=1)).date()


def ui_json(port: int) -> dict:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/", timeout=10) as response:
        return json.loads(response.read())


def probe(port: int) -> dict | None:
    try:
        return ui_json(port)
    except OSError:
        return None


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A master and two workers (1 core, 1 GiB each) on 127.0.0.1; stopped by PID at the end."""
    base = tmp_path_factory.mktemp("spark-cluster")
    port, ui = free_port(), free_port()
    worker_uis = [free_port(), free_port()]
    # the master's and workers' JVMs run as the suite's others do (tests/conftest.py): C1 only, serial GC;
    # so do the executors the workers start for the jobs (they inherit the worker's environment, in
    # which every JVM reads JAVA_TOOL_OPTIONS)
    env = venv_env(
        {
            "SPARK_LOCAL_IP": "127.0.0.1",
            "SPARK_WORKER_DIR": str(base / "work"),
            "SPARK_DAEMON_JAVA_OPTS": os.environ.get("SPARK_SUBMIT_OPTS", ""),
            "JAVA_TOOL_OPTIONS": SHORT_JVM_OPTIONS,
        }
    )
    spark_class = str(VENV_BIN / "spark-class")
    services = [
        start(
            "spark-master",
            [
                spark_class,
                "org.apache.spark.deploy.master.Master",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--webui-port",
                str(ui),
            ],
            env=env,
            log_dir=base,
        ),
    ]
    try:
        for number, worker_ui in enumerate(worker_uis, start=1):
            services.append(
                start(
                    f"spark-worker-{number}",
                    [
                        spark_class,
                        "org.apache.spark.deploy.worker.Worker",
                        "--host",
                        "127.0.0.1",
                        "--cores",
                        "1",
                        "--memory",
                        "1g",
                        "--webui-port",
                        str(worker_ui),
                        "--work-dir",
                        str(base / f"work-{number}"),
                        f"spark://127.0.0.1:{port}",
                    ],
                    env=env,
                    log_dir=base,
                )
            )
        wait_until(
            lambda: (probe(ui) or {}).get("aliveworkers") == 2,
            timeout=120,
            what="two ALIVE workers registered with the master",
            services=services,
        )
        yield {"url": f"spark://127.0.0.1:{port}", "ui": ui, "worker_uis": worker_uis, "services": services}
    finally:
        stop_all(services)
    assert not any(service.alive() for service in services)


def sorted_rows(lake, name: str) -> list[dict]:
    rows = DeltaTable(str(lake / "tables" / name)).to_pyarrow_dataset().to_table().to_pylist()
    return sorted(rows, key=lambda row: (row["window_start"], row["window_end"], row["account_id"], row["currency"]))


def test_batch_job_on_the_cluster_through_spark_default_equals_local_run(cluster, spark, tmp_path_factory, tmp_path):
    template = speed_layer_lake(tmp_path_factory.getbasetemp(), DAY, spark)
    on_cluster = copy_lake(template, tmp_path / "cluster-lake")
    local = copy_lake(template, tmp_path / "local-lake")
    home = airflow_home(tmp_path_factory.getbasetemp(), tmp_path / "airflow-home")

    env = airflow_env(home, on_cluster, spark_master=cluster["url"])
    done = run([str(VENV_BIN / "airflow"), "dags", "test", "batch_recompute", DAY.isoformat()], env=env, timeout=600)
    output = done.stdout + done.stderr
    assert done.returncode == 0 and "state=success" in output, output[-6000:]
    assert f"--master {cluster['url']}" in output

    # the same job on local[2]: in the test's own Spark session
    run_batch(spark, LabConfig(lake=local, table_engine="deltalake"), DayRange.of(DAY.isoformat()))

    cluster_rows = sorted_rows(on_cluster, "batch_truth")
    assert len(cluster_rows) > 1000
    assert cluster_rows == sorted_rows(local, "batch_truth")

    apps = ui_json(cluster["ui"])["completedapps"]
    assert [(app["name"], app["state"], app["cores"]) for app in apps] == [("lklab-batch", "FINISHED", 2)]
    for worker_ui in cluster["worker_uis"]:
        executors = ui_json(worker_ui)["finishedexecutors"]
        assert [executor["appid"] for executor in executors] == [apps[0]["id"]]


def test_replay_job_on_the_cluster_writes_the_live_speed_layers_rows(cluster, spark, tmp_path_factory, tmp_path):
    """The lake's speed layer ran live (four segments per micro-batch); the Kappa replay,
    submitted to the cluster, computes the same rows from the log alone."""
    from collections import Counter

    from lklab.pipelines.billing_windows.speed import SPEED_TABLES

    lake = copy_lake(speed_layer_lake(tmp_path_factory.getbasetemp(), DAY, spark), tmp_path / "lake")
    spark_submit(
        "replay_job",
        ["--name", "on-cluster"],
        env=venv_env({"LKLAB_LAKE": str(lake), "LKLAB_TABLE_ENGINE": "deltalake"}),
        master=cluster["url"],
        timeout=400,
    )
    ignore = BOOKKEEPING

    def rows(name: str) -> Counter:
        table = DeltaTable(str(lake / "tables" / name)).to_pyarrow_dataset().to_table().to_pylist()
        return Counter(tuple((k, str(v)) for k, v in sorted(row.items()) if k not in ignore) for row in table)

    for name in SPEED_TABLES:
        if name != "stream_metrics":  # one row per micro-batch: four segments live, one per segment replayed
            assert rows(f"kappa/on-cluster/{name}") == rows(name), name
    apps = [app for app in ui_json(cluster["ui"])["completedapps"] if app["name"].startswith("lklab-replay")]
    assert [(app["state"], app["cores"]) for app in apps] == [("FINISHED", 2)]

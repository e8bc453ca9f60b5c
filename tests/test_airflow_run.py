"""Airflow running the lab's DAGs for real: Spark jobs submitted through ``spark_default``,
Delta tables checked afterwards.

* ``airflow dags test``: ``batch_recompute`` then ``reconciliation`` for one day, in-process
  runs of the real tasks (each a real ``spark-submit``).
* Crash or breach: a DAG of two Spark tasks whose job exits 1 (a crash) or 3 (a breach), both
  with one retry; ``airflow dags test`` runs the crash twice and the breach once.
* A deployment on one machine: the test starts Airflow's own processes (API server, scheduler
  with the LocalExecutor, DAG processor) on a scratch ``AIRFLOW_HOME`` with SQLite, triggers
  ``batch_recompute`` through the REST API and waits for the ``reconciliation`` run that its
  ``batch_truth`` asset event starts. The processes are stopped by PID (and process group).

Both work on copies of one small lake with the speed layer already run over it, dated
yesterday (UTC): the day a daily DAG's latest interval covers, so unpausing it creates no
second run next to the triggered one.
"""

from __future__ import annotations

import json
import sqlite3
import urllib.error
import urllib.request
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from deltalake import DeltaTable

from lklab.generator import load_events
from lklab.truth import truth_windows
from shared.config import LabConfig
from tests.processes import (
    AIRFLOW_USER, SYSTEM_PATH, VENV_BIN, airflow_env, airflow_home, copy_lake, free_port, run, speed_layer_lake, start,
    stop_all, tail, wait_until,
)

pytestmark = pytest.mark.slow
AIRFLOW = str(VENV_BIN / "airflow")
DAY = (datetime.now(timezone.utc) - timedelta(days=1)).date()


def table(lake: Path, name: str) -> pa.Table:
    return DeltaTable(str(lake / "tables" / name)).to_pyarrow_dataset().to_table()


def rows_of_day(lake: Path, name: str, column: str = "window_start") -> list[dict]:
    rows = table(lake, name)
    day = rows.filter(pc.equal(pc.cast(rows[column], pa.date32()), pa.scalar(DAY, pa.date32())))
    return sorted(day.to_pylist(), key=lambda row: (row["window_start"], row["account_id"], row["currency"]))


def expected_truth(lake: Path) -> list[dict]:
    """The generator's own per-window totals (NumPy, not Spark) for ``DAY``, default windows."""
    truth = truth_windows(load_events(lake), LabConfig().window)
    day = truth.filter(pc.equal(pc.cast(truth["window_start"], pa.date32()), pa.scalar(DAY, pa.date32())))
    return sorted(day.to_pylist(), key=lambda row: (row["window_start"], row["account_id"], row["currency"]))


@pytest.fixture(scope="module")
def template(tmp_path_factory):
    return speed_layer_lake(tmp_path_factory.getbasetemp(), DAY)


@pytest.fixture
def home(tmp_path_factory, tmp_path):
    return airflow_home(tmp_path_factory.getbasetemp(), tmp_path / "home")


def task_logs(home: Path) -> str:
    logs = sorted((home / "logs").rglob("*.log")) if (home / "logs").exists() else []
    return "\n".join(f"--- {path.relative_to(home)} ---\n{tail(path, 60)}" for path in logs)


@pytest.fixture(scope="module")
def dags_test(template, tmp_path_factory):
    """``airflow dags test batch_recompute DAY`` on a copy of the lake: (lake, env, result)."""
    base = tmp_path_factory.mktemp("dags-test")
    lake = copy_lake(template, base / "lake")
    env = airflow_env(airflow_home(tmp_path_factory.getbasetemp(), base / "home"), lake)
    batch = run([AIRFLOW, "dags", "test", "batch_recompute", DAY.isoformat()], env=env, timeout=420)
    return lake, env, batch


def task_attempts(home: Path, dag_id: str) -> dict[tuple[str, int], tuple[str, int, int]]:
    """Each task instance of ``dag_id``'s latest run in the metadata database:
    ``(task_id, map_index) -> (state, try_number, earlier tries kept in the history)``."""
    with sqlite3.connect(f"file:{home / 'airflow.db'}?mode=ro", uri=True) as db:
        (run_id,) = db.execute("SELECT run_id FROM dag_run WHERE dag_id = ? ORDER BY id DESC LIMIT 1", (dag_id,)).fetchone()
        rows = db.execute(
            "SELECT task_id, map_index, state, try_number, (SELECT count(*) FROM task_instance_history h WHERE "
            "h.dag_id = t.dag_id AND h.run_id = t.run_id AND h.task_id = t.task_id AND h.map_index = t.map_index) "
            "FROM task_instance t WHERE dag_id = ? AND run_id = ?", (dag_id, run_id),
        ).fetchall()
    return {(task, index): (state, tries, earlier) for task, index, state, tries, earlier in rows}


EXIT_WITH = """import sys
print(f"lklab exit_with: the verdict of a job exiting {sys.argv[1]}", file=sys.stderr)
sys.exit(int(sys.argv[1]))
"""
CRASH_OR_BREACH = """from datetime import datetime, timedelta, timezone

from airflow.sdk import dag

from lklab.spark_task import spark_job


@dag(schedule=None, start_date=datetime(2026, 1, 1, tzinfo=timezone.utc), catchup=False,
     default_args={"owner": "lklab", "retries": 1, "retry_delay": timedelta(seconds=1)})
def crash_or_breach():
    spark_job("crash", "exit_with", ["1"], breach_exit_code=3)
    spark_job("breach", "exit_with", ["3"], breach_exit_code=3)


crash_or_breach()
"""


def test_a_breach_fails_at_once_and_a_crash_is_retried(tmp_path_factory, tmp_path):
    dags, jobs = tmp_path / "dags", tmp_path / "jobs"
    dags.mkdir()
    jobs.mkdir()
    (dags / "crash_or_breach.py").write_text(CRASH_OR_BREACH)
    (jobs / "exit_with.py").write_text(EXIT_WITH)
    home = airflow_home(tmp_path_factory.getbasetemp(), tmp_path / "home")
    env = airflow_env(home, tmp_path / "lake", spark_master=None)
    env.update({"AIRFLOW__CORE__DAGS_FOLDER": str(dags), "LKLAB_SPARK_JOBS": str(jobs), "PATH": SYSTEM_PATH})
    env.pop("PYSPARK_PYTHON")
    env.pop("PYSPARK_DRIVER_PYTHON")

    done = run([AIRFLOW, "dags", "test", "crash_or_breach", "2026-01-05"], env=env, timeout=600)

    output = done.stdout + done.stderr
    assert done.returncode == 1 and "DagRun failed" in output, output[-6000:]
    assert task_attempts(home, "crash_or_breach") == {
        ("crash", -1): ("failed", 2, 1),   # a crash: tried again after its retry delay
        ("breach", -1): ("failed", 1, 0),  # a breach: one attempt
    }
    assert output.count("exit_with.py 1. Error code is: 1.") == 2
    assert ("BREACH: exit_with.py ran and found a problem (exit 3); a breach fails at once, without retries: "
            "lklab exit_with: the verdict of a job exiting 3") in output


def test_dags_test_recomputes_batch_truth_for_the_logical_date(dags_test):
    lake, _, batch = dags_test
    assert batch.returncode == 0, batch.stdout[-4000:] + batch.stderr[-4000:]
    assert "state=success" in batch.stdout + batch.stderr
    assert f"batch_job.py --date {DAY.isoformat()}" in batch.stdout + batch.stderr
    truth = rows_of_day(lake, "batch_truth")
    assert truth == expected_truth(lake) and len(truth) > 1000
    runs = table(lake, "batch_runs").to_pylist()
    manifest = json.loads((lake / "generator" / "manifest.json").read_text())
    assert [(r["date_from"], r["date_to"], r["lines"], r["events"]) for r in runs] == [
        (DAY, DAY, manifest["lines"], manifest["events"])
    ]


def test_dags_test_reconciles_the_logical_date_after_the_batch(dags_test):
    lake, env, batch = dags_test
    assert batch.returncode == 0
    reconcile = run([AIRFLOW, "dags", "test", "reconciliation", DAY.isoformat()], env=env, timeout=420)
    assert reconcile.returncode == 0, reconcile.stdout[-4000:] + reconcile.stderr[-4000:]
    assert "state=success" in reconcile.stdout + reconcile.stderr
    assert_reconciled(lake)


def assert_reconciled(lake: Path) -> None:
    """``reconcile_job`` recorded a run for ``DAY`` against the speed layer, every gap explained."""
    runs = table(lake, "recon_runs").to_pylist()
    assert runs
    assert {(r["date_from"], r["date_to"], r["against"]) for r in runs} == {(DAY, DAY, "speed")}
    assert sum(r["windows_compared"] for r in runs) > 0
    for r in runs:
        assert (r["unexplained_events"], r["unexplained_amount"]) == (0, 0), r
        assert (r["corrected_unexplained_events"], r["corrected_unexplained_amount"]) == (0, 0), r
    diffs = table(lake, "recon_diffs")
    assert set(diffs["run_id"].to_pylist()) == {r["run_id"] for r in runs}
    assert diffs.num_rows == sum(r["windows_compared"] for r in runs)


class Api:
    """The Airflow REST API (v2) with a JWT from the simple auth manager."""

    def __init__(self, base: str, password: str) -> None:
        self.base = base
        self.password = password
        self.token: str | None = None

    def _call(self, method: str, path: str, body: dict | None = None) -> tuple[int, dict]:
        headers = {"Content-Type": "application/json"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.base + path, data=data, headers=headers, method=method)
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return response.status, json.loads(response.read() or b"{}")
        except urllib.error.HTTPError as err:
            return err.code, {"error": err.read().decode(errors="replace")}
        except (urllib.error.URLError, ConnectionError, TimeoutError) as err:
            return 0, {"error": str(err)}

    def login(self) -> None:
        status, body = self._call("POST", "/auth/token", {"username": AIRFLOW_USER, "password": self.password})
        assert status == 201, body
        self.token = body["access_token"]

    def get(self, path: str) -> tuple[int, dict]:
        return self._call("GET", path)

    def post(self, path: str, body: dict) -> tuple[int, dict]:
        return self._call("POST", path, body)

    def patch(self, path: str, body: dict) -> tuple[int, dict]:
        return self._call("PATCH", path, body)


def test_scheduler_runs_reconciliation_when_batch_truth_changes(template, home, tmp_path):
    lake = copy_lake(template, tmp_path / "lake")
    port = free_port()
    env = airflow_env(home, lake, api_port=port)
    logs = tmp_path / "processes"
    services = []
    try:
        services.append(start("api-server", [AIRFLOW, "api-server"], env=env, log_dir=logs))
        services.append(start("dag-processor", [AIRFLOW, "dag-processor"], env=env, log_dir=logs))
        services.append(start("scheduler", [AIRFLOW, "scheduler"], env=env, log_dir=logs))
        api = Api(f"http://127.0.0.1:{port}", json.loads((home / "passwords.json").read_text())[AIRFLOW_USER])

        def healthy():
            status, body = api.get("/api/v2/monitor/health")
            return status == 200 and all(
                body.get(part, {}).get("status") == "healthy" for part in ("metadatabase", "scheduler", "dag_processor")
            )

        wait_until(healthy, timeout=180, what="API server, scheduler and DAG processor healthy", services=services)
        api.login()
        wait_until(
            lambda: all(api.get(f"/api/v2/dags/{dag}")[0] == 200 for dag in ("batch_recompute", "reconciliation")),
            timeout=180, what="the DAG processor to register the DAGs", services=services,
        )
        status, body = api.post(
            "/api/v2/dags/batch_recompute/dagRuns",
            {"dag_run_id": "lab-test", "logical_date": f"{DAY.isoformat()}T00:00:00Z"},
        )
        assert status == 200, body
        for dag in ("batch_recompute", "reconciliation"):
            status, body = api.patch(f"/api/v2/dags/{dag}", {"is_paused": False})
            assert status == 200 and body["is_paused"] is False, body

        def finished_reconciliation():
            # A task waiting for a retry is reported at once: the retry would not fix the test.
            for dag in ("batch_recompute", "reconciliation"):
                status, body = api.get(f"/api/v2/dags/{dag}/dagRuns/~/taskInstances?state=up_for_retry&state=failed")
                if status == 200 and body["task_instances"]:
                    return [{"state": "task " + body["task_instances"][0]["state"], "dag_run_id": None}]
            status, body = api.get("/api/v2/dags/reconciliation/dagRuns")
            done = [r for r in body.get("dag_runs", []) if r["state"] in ("success", "failed")] if status == 200 else []
            return done or None

        reconciled = wait_until(
            finished_reconciliation, timeout=600, interval=3, what="the asset-triggered reconciliation run",
            services=services,
        )
        assert [r["state"] for r in reconciled] == ["success"], task_logs(home)
        run_id = reconciled[0]["dag_run_id"]
        assert reconciled[0]["run_type"] == "asset_triggered"
        status, events = api.get(f"/api/v2/dags/reconciliation/dagRuns/{run_id}/upstreamAssetEvents")
        assert status == 200, events
        assert [(e["name"], e["source_dag_id"], e["source_run_id"]) for e in events["asset_events"]] == [
            ("batch_truth", "batch_recompute", "lab-test")
        ]
        status, batch = api.get("/api/v2/dags/batch_recompute/dagRuns")
        assert [(r["dag_run_id"], r["state"]) for r in batch["dag_runs"]] == [("lab-test", "success")]
    finally:
        stop_all(services)

    assert all(not s.alive() for s in services)
    assert rows_of_day(lake, "batch_truth") == expected_truth(lake)
    assert_reconciled(lake)

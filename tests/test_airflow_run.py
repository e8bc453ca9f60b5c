"""Airflow running the lab's DAGs for real: Spark jobs submitted with the project's own
``spark-submit``, Delta tables checked afterwards.

* The README's "Embedded" steps, as written, from a fresh copy of the repository (its files as
  a clone holds them, and the venv ``make install`` made) in a clean environment: ``HOME``,
  ``LANG`` and the system ``PATH``, so no venv on ``PATH`` and no Spark connection; and the
  suite's JVM options (``SPARK_SUBMIT_OPTS``: C1 only, the serial collector, the tests' class
  archive), which change how fast a JVM starts, not what it runs or finds. A
  small lake, the speed layer, ``airflow db migrate``, then ``airflow dags test`` of
  ``batch_recompute``, ``reconciliation`` and ``lake_maintenance``: each run must succeed with
  real tables, Spark running locally.
* Crash or breach: a DAG of two Spark tasks whose job exits 1 (a crash) or 3 (a breach), both
  with one retry; ``airflow dags test`` runs the crash twice and the breach once.
* A deployment on one machine: Airflow's own processes (API server, scheduler with the
  LocalExecutor, DAG processor) on a scratch ``AIRFLOW_HOME`` with SQLite. ``batch_recompute``
  runs for two days while ``reconciliation`` is paused; unpaused, one more ``batch_truth``
  event (posted through the REST API) starts one run that consumes all three events and
  reconciles both days. The speed layer's rows of the first day were edited so that its gap
  is unexplained: that day's task fails at once as a breach, the other day's succeeds.
* A newer pipeline's DAG: ``unique_visitors_nightly`` over a 128-line page-view log and its speed
  layer, with the environment's ``pipeline`` setting saying billing: the truth equals the
  generator's oracle and reconcile proves the stream; with one truth member deleted, reconcile
  alone fails at once as a breach. The worker's JVM options name no JIT tier: both jobs' drivers
  print theirs, C1 alone, which the tasks chose (``lklab.spark_task``).

The Spark jobs read copies of small generated lakes; processes are stopped by PID (and
process group).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sqlite3
import subprocess
import urllib.error
import urllib.request
from collections import Counter
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from deltalake import DeltaTable

from lklab.maintenance import ALWAYS_ON_TABLES
from lklab.pipelines import DEFAULT, REGISTRY
from lklab.pipelines.billing_windows.generator import load_events
from lklab.pipelines.billing_windows.truth import truth_windows
from lklab.pipelines.unique_visitors.generator import load_page_views
from lklab.pipelines.unique_visitors.truth import truth_counts as visitor_oracle
from reconciliation.tables import TABLE_RECON_DIFFS, TABLE_RECON_RUNS
from shared.config import LabConfig
from tests.conftest import C1_ONLY
from tests.processes import (
    AIRFLOW_USER,
    REPO,
    SYSTEM_PATH,
    VENV_BIN,
    airflow_env,
    airflow_home,
    clean_env,
    copy_lake,
    free_port,
    run,
    speed_layer_lake,
    start,
    stop_all,
    tail,
    wait_until,
)

pytestmark = pytest.mark.slow
AIRFLOW = str(VENV_BIN / "airflow")
DAY = (datetime.now(UTC) - timedelta(days=1)).date()
README_DAY = date(2026, 1, 5)  # the generator's first day, the README's date


def table(lake: Path, name: str, version: int | None = None) -> pa.Table:
    return DeltaTable(str(lake / "tables" / name), version=version).to_pyarrow_dataset().to_table()


def on_day(rows: pa.Table, day: date, column: str = "window_start") -> list[dict]:
    rows = rows.filter(pc.equal(pc.cast(rows[column], pa.date32()), pa.scalar(day, pa.date32())))
    return sorted(rows.to_pylist(), key=lambda row: (row["window_start"], row["account_id"], row["currency"]))


def expected_truth(lake: Path, day: date) -> list[dict]:
    """The generator's own per-window totals (NumPy, not Spark) for ``day``, default windows."""
    return on_day(truth_windows(load_events(lake), LabConfig().window), day)


def assert_reconciled(lake: Path, day: date) -> list[dict]:
    """``reconcile_job`` recorded runs for ``day`` against the speed layer, every gap explained."""
    runs = [r for r in table(lake, "recon_runs").to_pylist() if (r["date_from"], r["date_to"]) == (day, day)]
    assert runs and {r["against"] for r in runs} == {"speed"}
    assert sum(r["windows_compared"] for r in runs) > 0
    for r in runs:
        assert (r["unexplained_events"], r["unexplained_amount"]) == (0, 0), r
        assert (r["corrected_unexplained_events"], r["corrected_unexplained_amount"]) == (0, 0), r
    diffs = table(lake, "recon_diffs").filter(
        pc.is_in(table(lake, "recon_diffs")["run_id"], pa.array([r["run_id"] for r in runs]))
    )
    # every window that differs is listed; the exact matches are only counted
    unmatched = sum(r["windows_compared"] - r["windows_matched"] for r in runs)
    assert pc.sum(pc.not_equal(diffs["status"], "match")).as_py() == unmatched > 0
    assert diffs.num_rows < sum(r["windows_compared"] for r in runs)
    return runs


def row_counts(rows: pa.Table) -> Counter:
    """A table's rows as a multiset (lists and structs included)."""
    return Counter(json.dumps(row, sort_keys=True, default=str) for row in rows.to_pylist())


def task_attempts(home: Path, dag_id: str) -> dict[tuple[str, int], tuple[str, int, int]]:
    """Each task instance of ``dag_id``'s latest run in the metadata database:
    ``(task_id, map_index) -> (state, try_number, earlier tries kept in the history)``."""
    with sqlite3.connect(f"file:{home / 'airflow.db'}?mode=ro", uri=True) as db:
        (run_id,) = db.execute(
            "SELECT run_id FROM dag_run WHERE dag_id = ? ORDER BY id DESC LIMIT 1", (dag_id,)
        ).fetchone()
        rows = db.execute(
            "SELECT task_id, map_index, state, try_number, (SELECT count(*) FROM task_instance_history h WHERE "
            "h.dag_id = t.dag_id AND h.run_id = t.run_id AND h.task_id = t.task_id AND h.map_index = t.map_index) "
            "FROM task_instance t WHERE dag_id = ? AND run_id = ?",
            (dag_id, run_id),
        ).fetchall()
    return {(task, index): (state, tries, earlier) for task, index, state, tries, earlier in rows}


def dag_run_states(home: Path) -> dict[str, list[str]]:
    with sqlite3.connect(f"file:{home / 'airflow.db'}?mode=ro", uri=True) as db:
        rows = db.execute("SELECT dag_id, state FROM dag_run ORDER BY id").fetchall()
    states: dict[str, list[str]] = {}
    for dag_id, state in rows:
        states.setdefault(dag_id, []).append(state)
    return states


# --- The README's embedded steps ---------------------------------------------------------------


def embedded_steps() -> str:
    text = (REPO / "README.md").read_text()
    block = re.search(r"<!-- embedded:start -->\s*```bash\n(.*?)```\s*<!-- embedded:end -->", text, re.S)
    assert block, "the README's embedded block (<!-- embedded:start --> ... <!-- embedded:end -->) is missing"
    return block.group(1)


def tour_steps() -> str:
    """The README's tour: every bash block between its markers, in order, as one script."""
    text = (REPO / "README.md").read_text()
    section = re.search(r"<!-- tour:start -->(.*?)<!-- tour:end -->", text, re.S)
    assert section, "the README's tour (<!-- tour:start --> ... <!-- tour:end -->) is missing"
    return "".join(re.findall(r"```bash\n(.*?)```", section.group(1), re.S))


def fresh_clone(destination: Path) -> Path:
    """What a fresh clone after ``make install`` holds: the repository's files (tracked, and new
    ones not ignored, as they are in the working tree) and the venv."""
    listed = (
        subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=REPO,
            capture_output=True,
            check=True,
        )
        .stdout.decode()
        .split("\0")
    )
    for name in filter(None, listed):
        if (REPO / name).is_file():
            (destination / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, destination / name)
    (destination / ".venv").symlink_to(VENV_BIN.parent)
    return destination


def this_checkout_on_path() -> dict[str, str]:
    """Nothing when the venv imports the project from this checkout, as after ``make install``
    here; ``PYTHONPATH`` naming this checkout when the venv imports another one (a venv shared by
    several work trees, its editable install made in one of them), so that the steps run this
    checkout's code as they would after ``make install`` here."""
    done = subprocess.run(
        [str(VENV_BIN / "python"), "-c", "import lklab; print(lklab.__file__)"],
        env={"PATH": SYSTEM_PATH},
        cwd="/",
        capture_output=True,
        text=True,
        check=True,
    )
    installed = Path(done.stdout.strip()).resolve().parents[1]
    return {} if installed == REPO.resolve() else {"PYTHONPATH": str(REPO)}


@pytest.fixture(scope="module")
def readme_steps(tmp_path_factory):
    """The README's embedded block run by ``bash -e`` in a fresh clone: (clone, result)."""
    base = tmp_path_factory.mktemp("readme")
    clone = fresh_clone(base / "lab")
    # The suite's JVM options (tests/conftest.py) for its three JVMs (the speed layer, the batch and
    # reconcile jobs): a faster start, nothing the steps could rely on (no path, connection or setting).
    env = clean_env(base / "home", {**this_checkout_on_path(), "SPARK_SUBMIT_OPTS": os.environ["SPARK_SUBMIT_OPTS"]})
    done = run(["bash", "-e", "-x", "-c", embedded_steps()], env=env, cwd=clone, timeout=1800)
    return clone, done


def test_readme_embedded_steps_run_as_written_in_a_clean_environment(readme_steps):
    clone, done = readme_steps
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-8000:]
    assert dag_run_states(clone / ".airflow") == {
        "batch_recompute": ["success"],
        "reconciliation": ["success"],
        "lake_maintenance": ["success"],
    }
    # No connection configured, no venv on PATH: the project's spark-submit, Spark in local mode.
    submitted = re.findall(r"Spark-Submit cmd: (\S+) --master (\S+) .*? (\S+\.py) ", output)
    assert submitted == [
        (str(VENV_BIN / "spark-submit"), "local[2]", str(REPO / "spark_jobs" / "batch_job.py")),
        (str(VENV_BIN / "spark-submit"), "local[2]", str(REPO / "spark_jobs" / "reconcile_job.py")),
    ]
    assert "no 'spark_default' connection is configured: Spark runs on local[2]" in output
    lake = clone / "lake"
    truth = on_day(table(lake, "batch_truth"), README_DAY)
    assert truth == expected_truth(lake, README_DAY) and len(truth) > 1000
    assert [(r["date_from"], r["date_to"]) for r in table(lake, "batch_runs").to_pylist()] == [(README_DAY, README_DAY)]
    assert_reconciled(lake, README_DAY)
    assert task_attempts(clone / ".airflow", "reconciliation") == {
        ("days_covered", -1): ("success", 1, 0),
        ("reconcile", 0): ("success", 1, 0),
    }


def test_readme_tour_runs_as_written_in_a_fresh_shell_beside_a_lake_another_run_left(readme_steps):
    """The tour, in a new shell of the clone the embedded steps ran in (their ``./lake`` holds a log,
    as ``make demo``'s does): generate, batch, speed and reconcile, each exiting 0, the batch equal
    to the generator's ground truth and nothing unexplained."""
    clone, done = readme_steps
    assert done.returncode == 0 and (clone / "lake" / "log").is_dir()
    env = clean_env(
        clone.parent / "home", {**this_checkout_on_path(), "SPARK_SUBMIT_OPTS": os.environ["SPARK_SUBMIT_OPTS"]}
    )
    toured = run(["bash", "-e", "-x", "-c", tour_steps()], env=env, cwd=clone, timeout=1800)
    output = toured.stdout + toured.stderr
    assert toured.returncode == 0, output[-8000:]
    assert "equals the generator's ground truth: yes, exactly" in toured.stdout
    assert "unexplained: 0 windows, 0 events, 0" in toured.stdout
    assert (clone / "tour-lake" / "log").is_dir()


def test_readme_maintenance_compacts_every_always_on_table_with_its_rows_unchanged(readme_steps):
    """``lake_maintenance`` ran last: each table's latest version holds the rows of the version
    before its compaction, which is still readable (time travel within the 7-day retention)."""
    clone, done = readme_steps
    assert done.returncode == 0
    lake = clone / "lake"
    compacted = {}
    other_pipelines = {  # the README runs billing only, and reconciles no tables of its own
        entry.table.name
        for pipeline in REGISTRY.values()
        if pipeline.name != DEFAULT
        for entry in pipeline.stream().layout
    } | {TABLE_RECON_RUNS.name, TABLE_RECON_DIFFS.name}
    for name in (t.name for t in ALWAYS_ON_TABLES if t.name not in other_pipelines):
        delta = DeltaTable(str(lake / "tables" / name))
        rows = row_counts(table(lake, name))
        assert len(delta.file_uris()) == 1, name
        optimize = [c["version"] for c in delta.history() if c["operation"] == "OPTIMIZE"]
        if optimize:
            (version,) = optimize
            assert version == delta.version(), f"{name}: commits after its compaction"
            before = row_counts(table(lake, name, version - 1))
            assert rows == before, name
            compacted[name] = len(DeltaTable(str(lake / "tables" / name), version=version - 1).file_uris())
    # One append per micro-batch (segments of 30 minutes over six hours): many small files.
    assert {"late_events", "duplicate_events", "stream_metrics", "speed_aggregates"} <= set(compacted)
    assert compacted["stream_metrics"] == table(lake, "stream_metrics").num_rows > 10
    assert f"maintenance of {lake} (retention 7d)" in done.stdout + done.stderr


# --- Crash or breach -----------------------------------------------------------------------------

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

    done = run([AIRFLOW, "dags", "test", "crash_or_breach", README_DAY.isoformat()], env=env, timeout=600)

    output = done.stdout + done.stderr
    assert done.returncode == 1 and "DagRun failed" in output, output[-6000:]
    assert task_attempts(home, "crash_or_breach") == {
        ("crash", -1): ("failed", 2, 1),  # a crash: tried again after its retry delay
        ("breach", -1): ("failed", 1, 0),  # a breach: one attempt
    }
    assert output.count("exit_with.py 1. Error code is: 1.") == 2
    assert (
        "BREACH: exit_with.py ran and found a problem (exit 3); a breach fails at once, without retries: "
        "lklab exit_with: the verdict of a job exiting 3"
    ) in output


# --- A deployment: the scheduler, two days, one breach ----------------------------------------


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


def task_logs(home: Path) -> str:
    logs = sorted((home / "logs").rglob("*.log")) if (home / "logs").exists() else []
    return "\n".join(f"--- {path.relative_to(home)} ---\n{tail(path, 60)}" for path in logs)


def drop_an_account_from_the_speed_layer(lake: Path, day: date) -> str:
    """Delete one account's speed-layer windows of ``day``: a gap no side output explains."""
    windows = table(lake, "speed_aggregates")
    account = on_day(windows, day)[0]["account_id"]
    start = datetime(day.year, day.month, day.day, tzinfo=UTC)
    DeltaTable(str(lake / "tables" / "speed_aggregates")).delete(
        f"account_id = '{account}' AND window_start >= '{start.isoformat()}' "
        f"AND window_start < '{(start + timedelta(days=1)).isoformat()}'"
    )
    assert not [w for w in on_day(table(lake, "speed_aggregates"), day) if w["account_id"] == account]
    return account


def test_scheduler_reconciles_every_day_its_batch_truth_events_cover(spark, tmp_path_factory, tmp_path):
    first, second = DAY - timedelta(days=1), DAY
    lake = copy_lake(speed_layer_lake(tmp_path_factory.getbasetemp(), DAY, spark), tmp_path / "lake")
    drop_an_account_from_the_speed_layer(lake, first)
    home = airflow_home(tmp_path_factory.getbasetemp(), tmp_path / "home")
    port = free_port()
    # The DAG processor parses each DAG file once: by default it parses every file again every 30 s
    # (about a third of its CPU in this test), for files that do not change while it runs.
    env = {**airflow_env(home, lake, api_port=port), "AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL": "3600"}
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
            timeout=180,
            what="the DAG processor to register the DAGs",
            services=services,
        )

        def no_retry_or_failure(dag: str) -> None:
            # A task waiting for a retry is reported at once: the retry would not fix the test.
            status, body = api.get(f"/api/v2/dags/{dag}/dagRuns/~/taskInstances?state=up_for_retry&state=failed")
            assert status == 200 and not body["task_instances"], f"{body}\n{task_logs(home)}"

        # Two batch days while reconciliation is paused: their events wait for its next run.
        for run_id, day in (("lab-first", first), ("lab-second", second)):
            status, body = api.post(
                "/api/v2/dags/batch_recompute/dagRuns",
                {"dag_run_id": run_id, "logical_date": f"{day.isoformat()}T00:00:00Z"},
            )
            assert status == 200, body
        status, body = api.patch("/api/v2/dags/batch_recompute", {"is_paused": False})
        assert status == 200 and body["is_paused"] is False, body

        def batches_done():
            no_retry_or_failure("batch_recompute")
            status, body = api.get("/api/v2/dags/batch_recompute/dagRuns")
            runs = sorted((r["dag_run_id"], r["state"]) for r in body.get("dag_runs", []))
            return runs if status == 200 and all(state == "success" for _, state in runs) and len(runs) == 2 else None

        batches = wait_until(batches_done, timeout=900, interval=1, what="both batch runs", services=services)
        assert batches == [("lab-first", "success"), ("lab-second", "success")]

        status, body = api.patch("/api/v2/dags/reconciliation", {"is_paused": False})
        assert status == 200 and body["is_paused"] is False, body
        status, assets = api.get("/api/v2/assets?name_pattern=batch_truth")
        assert status == 200 and [a["name"] for a in assets["assets"]] == ["batch_truth"], assets
        status, body = api.post(
            "/api/v2/assets/events", {"asset_id": assets["assets"][0]["id"], "extra": {"days": [second.isoformat()]}}
        )
        assert status == 200, body

        def finished_reconciliation():
            status, body = api.get("/api/v2/dags/reconciliation/dagRuns")
            done = [r for r in body.get("dag_runs", []) if r["state"] in ("success", "failed")] if status == 200 else []
            return done or None

        reconciled = wait_until(
            finished_reconciliation,
            timeout=900,
            interval=1,
            what="the asset-triggered reconciliation run",
            services=services,
        )
        (recon,) = reconciled
        assert (recon["run_type"], recon["state"]) == ("asset_triggered", "failed"), task_logs(home)
        status, events = api.get(f"/api/v2/dags/reconciliation/dagRuns/{recon['dag_run_id']}/upstreamAssetEvents")
        assert status == 200, events
        consumed = [(e["name"], e["source_dag_id"], e["source_run_id"], e["extra"]) for e in events["asset_events"]]
        assert sorted(consumed, key=str) == [
            ("batch_truth", "batch_recompute", "lab-first", {}),
            ("batch_truth", "batch_recompute", "lab-second", {}),
            ("batch_truth", None, None, {"days": [second.isoformat()], "from_rest_api": True}),
        ]
        status, body = api.get(f"/api/v2/dags/reconciliation/dagRuns/{recon['dag_run_id']}/taskInstances")
        assert status == 200, body
        attempts = {(t["task_id"], t["map_index"]): (t["state"], t["try_number"]) for t in body["task_instances"]}
        assert attempts == {
            ("days_covered", -1): ("success", 1),
            ("reconcile", 0): ("failed", 1),  # the first day: a breach, not retried
            ("reconcile", 1): ("success", 1),  # the second day
        }, task_logs(home)
        status, body = api.get("/api/v2/dags/batch_recompute/dagRuns")
        assert sorted((r["dag_run_id"], r["state"]) for r in body["dag_runs"]) == batches
    finally:
        stop_all(services)

    assert all(not s.alive() for s in services)
    breach_log = next(
        (home / "logs").glob("dag_id=reconciliation/**/task_id=reconcile/map_index=0/attempt=1.log")
    ).read_text()
    assert f"--date {first.isoformat()} --against speed" in breach_log
    assert (
        "BREACH: reconcile_job.py ran and found a problem (exit 3); a breach fails at once, without retries: "
        in breach_log
    )
    assert "lklab reconcile: UNEXPLAINED GAP: " in breach_log
    for day in (first, second):
        assert on_day(table(lake, "batch_truth"), day) == expected_truth(lake, day)
    assert_reconciled(lake, second)
    breached = [r for r in table(lake, "recon_runs").to_pylist() if r["date_from"] == first]
    assert breached and sum(r["unexplained_events"] for r in breached) > 0


# --- A newer pipeline's nightly DAG ----------------------------------------------------------

VISITORS = "unique_visitors"
# 120 page views over 5 minutes, resends and bad lines: 128 lines in 7 one-minute segments,
# which the speed layer reads in 4 micro-batches; clickstream traffic holds some views back.
VISITORS_LOG = [
    "--scenario",
    "clickstream",
    "--events",
    "120",
    "--seed",
    "5",
    "--span",
    "5m",
    "--accounts",
    "10",
    "--duplicate-rate",
    "0.05",
    "--malformed-rate",
    "0.02",
]
WINDOW_KEY = [(c, "ascending") for c in ("window_start", "window_end", "user_id")]


def visitors_lake(spark, lake: Path, env: dict[str, str]) -> Path:
    """A small page-view log (``lklab generate``, as an operator runs it) and the unique_visitors
    speed layer over it, two segments per micro-batch (in the test's own Spark session: the
    DAG's jobs are the processes under test)."""
    from lklab.pipelines.unique_visitors.speed import run_visitors_speed

    done = run(
        [str(VENV_BIN / "lklab"), "generate", "--pipeline", VISITORS, *VISITORS_LOG, "--lake", str(lake)],
        env=env,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "120 page views, 6 resends, 2 malformed lines: 128 lines in 7 segments" in done.stdout
    layer = run_visitors_speed(
        spark,
        LabConfig(lake=lake, table_engine="deltalake", pipeline=VISITORS),
        available_now=True,
        segments_per_batch=2,
    )
    assert layer.batches == 4
    return lake


def submitted(output: str) -> list[tuple[str, str]]:
    """Each ``spark-submit`` a run logged: (job, its arguments)."""
    return re.findall(r"Spark-Submit cmd: \S+ .*? \S+/spark_jobs/(\S+\.py) ([^\[\n]*?)\s*(?:\[|$)", output, re.M)


def test_unique_visitors_nightly_recomputes_the_truth_and_reconciles(spark, tmp_path_factory, tmp_path):
    """One run of ``unique_visitors_nightly``. (A breach failing at once is the billing DAG's test:
    the same ``spark_job``; the unique_visitors verdict line is ``test_visitors_jobs``'s.)"""
    home = airflow_home(tmp_path_factory.getbasetemp(), tmp_path / "home")
    # The lab's pipeline setting says billing: the DAG must name its pipeline on every command line.
    env = {**airflow_env(home, tmp_path / "lake"), "LKLAB_PIPELINE": "billing_windows"}
    lake = visitors_lake(spark, tmp_path / "lake", env)
    # The worker's JVM options without the suite's tier: the tasks choose their drivers' compilers
    # (lklab.spark_task), which print their flags.
    given = [o for o in env["SPARK_SUBMIT_OPTS"].split() if o != C1_ONLY]
    env["SPARK_SUBMIT_OPTS"] = " ".join([*given, "-XX:+PrintFlagsFinal"])

    done = run([AIRFLOW, "dags", "test", "unique_visitors_nightly", README_DAY.isoformat()], env=env, timeout=600)

    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-8000:]
    # Both jobs' drivers on C1 alone: a reconcile always, a batch of this small a log too.
    assert re.findall(r"intx TieredStopAtLevel\s+= (\d) +\{product\} \{(.+?)\}", output) == [("1", "command line")] * 2
    assert task_attempts(home, "unique_visitors_nightly") == {
        ("recompute_truth", -1): ("success", 1, 0),
        ("reconcile", -1): ("success", 1, 0),
    }
    assert submitted(output) == [
        ("batch_job.py", "--pipeline unique_visitors"),
        ("reconcile_job.py", "--pipeline unique_visitors --against speed"),
    ]
    # The truth: the generator's oracle (no Spark), 40 (window, user) rows of 113 URLs, every line accounted for.
    truth = table(lake, "visitors_truth").sort_by(WINDOW_KEY)
    assert truth.to_pylist() == visitor_oracle(load_page_views(lake), LabConfig().window).to_pylist()
    assert (truth.num_rows, pc.sum(truth["distinct_urls"]).as_py()) == (40, 113)
    assert "128 lines = 120 views + 6 duplicates + 2 dead letters + 0 heartbeats (conserved)" in output
    assert (table(lake, "visitors_batch_duplicates").num_rows, table(lake, "visitors_batch_dead_letter").num_rows) == (
        6,
        2,
    )
    # The speed layer against it: 38 windows served right, 2 short by views beyond the watermark
    # (in the late side output), nothing unexplained.
    corrected = table(lake, "visitors_corrected").sort_by(WINDOW_KEY)
    assert set(corrected["run_id"].to_pylist()) == {"speed: truth v1, stream batch 3"}
    assert Counter(corrected["verdict"].to_pylist()) == {"match": 38, "late": 2}
    assert corrected["corrected"].to_pylist() == corrected["truth"].to_pylist() == truth["distinct_urls"].to_pylist()
    assert corrected["reasons"].null_count == 40
    assert "40 (window, user) rows compared: 38 matching, 2 explained by the late side output, 0 differing" in output
    assert "proven: corrected (served members + late side output) == truth for every window" in output

    assert dag_run_states(home) == {"unique_visitors_nightly": ["success"]}


def test_a_declared_pipelines_nightly_recomputes_its_truth_and_reconciles(spark, tmp_path_factory, tmp_path):
    """One run of ``meter_kwh_nightly``, the DAG ``dags/declared_pipelines.py`` makes for the
    pipeline ``examples/meters/meters.toml`` declares (``$LKLAB_CONFIG``), over the example's
    log and live stream (``lklab ingest`` and ``speed`` in this process): its jobs read the
    declaration when they run, and print the figures of ``docs/bring-your-own-events.md``."""
    from lklab.cli import main
    from tests.conftest import cli_in_this_process

    home = airflow_home(tmp_path_factory.getbasetemp(), tmp_path / "home")
    meters = shutil.copytree(REPO / "examples" / "meters", tmp_path / "meters")
    config, lake = meters / "meters.toml", tmp_path / "lake"
    env = {**airflow_env(home, lake), "LKLAB_CONFIG": str(config)}
    selects = ["--pipeline", "meter_kwh", "--config", str(config), "--lake", str(lake)]
    with cli_in_this_process():
        readings = [str(path) for path in sorted(meters.glob("readings-*.jsonl"))]
        assert main(["ingest", *selects, *readings]) == 0
        assert main(["speed", *selects, "--available-now"]) == 0

    done = run([AIRFLOW, "dags", "test", "meter_kwh_nightly", README_DAY.isoformat()], env=env, timeout=600)

    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-8000:]
    assert task_attempts(home, "meter_kwh_nightly") == {
        ("recompute_truth", -1): ("success", 1, 0),
        ("reconcile", -1): ("success", 1, 0),
    }
    assert submitted(output) == [
        ("batch_job.py", "--pipeline meter_kwh"),
        ("reconcile_job.py", "--pipeline meter_kwh --against speed"),
    ]
    assert "20 lines = 17 events + 1 duplicates + 1 dead letters + 1 heartbeats (conserved)" in output
    assert (
        "meter_kwh: speed (segments 1..4) against the truth (segments 1..4): windows match 5, value_mismatch 2, "
        "missing_in_stream 0, extra_in_stream 0" in output
    )
    assert "unexplained: 0 windows" in output
    assert table(lake, "meter_kwh_truth").num_rows == 7
    assert dag_run_states(home) == {"meter_kwh_nightly": ["success"]}

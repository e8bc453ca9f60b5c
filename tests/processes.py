"""Real processes for integration tests: started in their own process group, stopped by PID.

A ``Service`` is a long-running process (a Spark master, an Airflow scheduler) whose output
goes to a log file, so a failing test can show what the process said. ``stop`` signals the
whole process group (the JVM a ``spark-class`` script execs, the task processes an Airflow
scheduler forks), SIGTERM first, SIGKILL after a grace period. ``run`` is a one-shot command
with a deadline whose group is killed when the deadline passes.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime
from pathlib import Path
from typing import TypeVar

__all__ = [
    "Service",
    "start",
    "stop",
    "stop_all",
    "run",
    "wait_until",
    "free_port",
    "tail",
    "venv_env",
    "spark_submit",
    "speed_layer_lake",
    "copy_lake",
    "airflow_env",
    "airflow_home",
    "clean_env",
    "VENV_BIN",
    "REPO",
    "AIRFLOW_USER",
    "SYSTEM_PATH",
]

VENV_BIN = Path(sys.executable).parent
REPO = Path(__file__).resolve().parents[1]
AIRFLOW_USER = "lab"
# What a login shell's PATH holds before anyone adds a venv to it (Debian's default).
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
T = TypeVar("T")


@dataclass
class Service:
    """A process started by ``start``; ``log`` holds its stdout and stderr."""

    name: str
    process: subprocess.Popen
    log: Path

    @property
    def pid(self) -> int:
        return self.process.pid

    def alive(self) -> bool:
        return self.process.poll() is None


def venv_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The test's environment with the project's ``bin`` first on ``PATH`` (spark-submit, airflow)."""
    env = {**os.environ, "PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    env["PYSPARK_PYTHON"] = sys.executable
    env["PYSPARK_DRIVER_PYTHON"] = sys.executable
    env.update(extra or {})
    return env


def clean_env(home: Path, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """An environment as a new login shell has it: ``HOME``, ``LANG`` and the system ``PATH``
    (no venv, no Spark, Airflow or lab settings), plus ``extra``."""
    home.mkdir(parents=True, exist_ok=True)
    return {"HOME": str(home), "LANG": "C.UTF-8", "PATH": SYSTEM_PATH, **(extra or {})}


def start(name: str, argv: list[str], *, env: Mapping[str, str], log_dir: Path, cwd: Path | None = None) -> Service:
    """Start ``argv`` as the leader of a new process group, output to ``log_dir/name.log``."""
    log_dir.mkdir(parents=True, exist_ok=True)
    log = log_dir / f"{name}.log"
    with log.open("ab") as out:
        process = subprocess.Popen(
            argv,
            env=dict(env),
            cwd=cwd,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    return Service(name, process, log)


def _signal_group(pid: int, sig: int) -> bool:
    try:
        os.killpg(pid, sig)
        return True
    except ProcessLookupError:
        return False


def _group_alive(pid: int) -> bool:
    return _signal_group(pid, 0)


def stop(service: Service, grace: float = 20.0) -> None:
    """SIGTERM the service's process group, SIGKILL whatever is left after ``grace`` seconds."""
    _signal_group(service.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and (service.alive() or _group_alive(service.pid)):
        time.sleep(0.2)
    _signal_group(service.pid, signal.SIGKILL)
    try:
        service.process.wait(timeout=10)
    except subprocess.TimeoutExpired:  # pragma: no cover - a process that ignores SIGKILL is stuck in the kernel
        pass


def stop_all(services: Iterable[Service], grace: float = 20.0) -> None:
    """Stop services in reverse start order (clients before the servers they talk to)."""
    for service in reversed(list(services)):
        stop(service, grace)


def tail(path: Path, lines: int = 40) -> str:
    """The last ``lines`` lines of a log file (empty when it does not exist)."""
    if not path.exists():
        return ""
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


def _describe(services: Iterable[Service]) -> str:
    return "\n".join(
        f"--- {s.name} (pid {s.pid}, {'running' if s.alive() else f'exited {s.process.returncode}'}) ---\n{tail(s.log)}"
        for s in services
    )


def wait_until(
    probe: Callable[[], T | None],
    *,
    timeout: float,
    what: str,
    interval: float = 1.0,
    services: Iterable[Service] = (),
) -> T:
    """Call ``probe`` until it returns something truthy; fail with the services' log tails.

    A service that exits while we wait fails the wait at once: nothing it was meant to do
    will happen any more.
    """
    services = list(services)
    deadline = time.monotonic() + timeout
    while True:
        result = probe()
        if result:
            return result
        dead = [s for s in services if not s.alive()]
        if dead:
            raise AssertionError(
                f"while waiting for {what}, {', '.join(s.name for s in dead)} exited:\n{_describe(services)}"
            )
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}\n{_describe(services)}")
        time.sleep(interval)


def run(
    argv: list[str], *, env: Mapping[str, str], timeout: float, cwd: Path | None = None
) -> subprocess.CompletedProcess:
    """Run a command to completion in its own process group; kill the group at the deadline."""
    process = subprocess.Popen(
        argv,
        env=dict(env),
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _signal_group(process.pid, signal.SIGKILL)
        out, err = process.communicate()
        raise AssertionError(
            f"{' '.join(argv)} did not finish within {timeout:.0f}s\n{out[-3000:]}\n{err[-3000:]}"
        ) from None
    finally:
        # Anything the command left behind in its group (a JVM, a Python worker) goes too.
        _signal_group(process.pid, signal.SIGKILL)
    return subprocess.CompletedProcess(argv, process.returncode, out, err)


def free_port() -> int:
    """A TCP port nothing listens on right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def spark_submit(job: str, args: list[str], *, env: Mapping[str, str], master: str = "local[2]", timeout: float = 300):
    """``spark-submit spark_jobs/<job>.py ARGS`` as a real process; fails the test on a non-zero exit."""
    argv = [
        str(VENV_BIN / "spark-submit"),
        "--master",
        master,
        "--conf",
        f"spark.pyspark.python={sys.executable}",
        str(REPO / "spark_jobs" / f"{job}.py"),
        *args,
    ]
    done = run(argv, env=env, timeout=timeout)
    assert done.returncode == 0, (
        f"{job} {' '.join(args)} exited {done.returncode}:\n{done.stdout[-3000:]}\n{done.stderr[-5000:]}"
    )
    return done


def speed_layer_lake(cache: Path, day: date, spark) -> Path:
    """A small generated lake with the speed layer run over the whole log, built once under
    ``cache`` and reused: 3,000 billing events over nine hours of event time, from 21:00 UTC the
    day before ``day`` to 06:00 on ``day`` (two thirds of them on ``day``), in 30-minute segments.
    The speed layer (four segments per micro-batch) runs in ``spark``, the tests' own session:
    the processes under test are the jobs that read the lake afterwards.

    Callers copy it (``copy_lake``) before writing to it.
    """
    from lklab.pipelines.billing_windows.generator import GeneratorParams, generate
    from lklab.pipelines.billing_windows.speed import run_speed
    from shared.config import LabConfig

    lake = cache / f"speed-lake-{day.isoformat()}"
    if (lake / ".complete").exists():
        return lake
    shutil.rmtree(lake, ignore_errors=True)
    start = int(datetime(day.year, day.month, day.day, tzinfo=UTC).timestamp() - 3 * 3600) * 1_000_000
    generate(
        GeneratorParams(
            events=3_000, seed=11, start=start, span=9 * 3600 * 1_000_000, segment_interval=30 * 60 * 1_000_000
        ),
        lake,
    )
    run_speed(spark, LabConfig(lake=lake, table_engine="deltalake"), available_now=True, segments_per_batch=4)
    (lake / ".complete").touch()
    return lake


def copy_lake(template: Path, destination: Path) -> Path:
    """A private copy of a lake (log, tables, checkpoints, generator files)."""
    shutil.copytree(template, destination, ignore=shutil.ignore_patterns(".complete"))
    return destination


def airflow_env(
    home: Path, lake: Path, *, api_port: int = 8080, spark_master: str | None = "local[2]"
) -> dict[str, str]:
    """Everything a one-machine Airflow deployment of the lab needs, from the environment.

    The metadata database (SQLite) and the task logs live in ``home``; ``spark_default``
    points at ``spark_master`` (``local[N]`` or ``spark://host:port``; None: no connection, the
    DAGs' own default); the lab's jobs read ``LKLAB_LAKE``.
    """
    env = venv_env(
        {
            "AIRFLOW_HOME": str(home),
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home / 'airflow.db'}",
            "AIRFLOW__LOGGING__BASE_LOG_FOLDER": str(home / "logs"),
            "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags"),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
            "AIRFLOW__CORE__PARALLELISM": "2",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": f"{AIRFLOW_USER}:admin",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(home / "passwords.json"),
            "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://127.0.0.1:{api_port}/execution/",
            "AIRFLOW__API__HOST": "127.0.0.1",
            "AIRFLOW__API__PORT": str(api_port),
            "AIRFLOW__API__BASE_URL": f"http://127.0.0.1:{api_port}",
            "AIRFLOW__API_AUTH__JWT_SECRET": f"lklab-test-{home.name}",
            "LKLAB_LAKE": str(lake),
            "LKLAB_TABLE_ENGINE": "deltalake",
            "SPARK_LOCAL_IP": "127.0.0.1",
        }
    )
    env.pop("AIRFLOW_CONN_SPARK_DEFAULT", None)
    if spark_master is not None:
        connection = (
            spark_master
            if spark_master.startswith("spark://")
            else json.dumps({"conn_type": "spark", "host": spark_master})
        )
        env["AIRFLOW_CONN_SPARK_DEFAULT"] = connection
    return env


def airflow_home(cache: Path, destination: Path) -> Path:
    """A private AIRFLOW_HOME with a migrated SQLite database and one admin user's password.

    ``airflow db migrate`` runs once per session under ``cache``; each caller gets a copy.
    """
    template = cache / "airflow-home"
    if not (template / ".complete").exists():
        shutil.rmtree(template, ignore_errors=True)
        template.mkdir(parents=True)
        (template / "passwords.json").write_text(json.dumps({AIRFLOW_USER: secrets.token_urlsafe(16)}))
        done = run(
            [str(VENV_BIN / "airflow"), "db", "migrate"], env=airflow_env(template, template / "lake"), timeout=300
        )
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
        (template / ".complete").touch()
    shutil.copytree(template, destination, ignore=shutil.ignore_patterns(".complete", "logs"))
    return destination

"""The compose deployment, checked without a Docker engine.

Every command, path, image and setting ``docker-compose.yml`` refers to must exist: container
paths under ``/opt/lklab`` are the repository (the Dockerfile copies it there), Airflow commands
parse with the installed Airflow's own CLI parser, Spark classes are in the installed jars,
the producer's flags parse with its own parser. Credentials come from required environment
variables, each listed in ``docker/compose.env.example``.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
COMPOSE = yaml.safe_load((REPO / "docker-compose.yml").read_text())
SERVICES = COMPOSE["services"]
DOCKERFILE = REPO / "docker" / "Dockerfile"
IN_IMAGE = "/opt/lklab/"
LAKE_SERVICES = (
    "airflow-init",
    "airflow-api-server",
    "airflow-scheduler",
    "airflow-dag-processor",
    "spark-worker-1",
    "spark-worker-2",
    "speed-layer",
    "producer",
    "lklab",
)
AIRFLOW_SERVICES = ("airflow-init", "airflow-api-server", "airflow-scheduler", "airflow-dag-processor")
VARIABLE = re.compile(r"\$\{([A-Z0-9_]+)(?:(:?[-?])([^}]*))?\}")
REQUIRED = re.compile(r"\$\{([A-Z0-9_]+):\?[^}]+\}")
MASTER = "spark://spark-master:7077"


def example_env() -> dict[str, str]:
    pairs = (
        line.split("=", 1)
        for line in (REPO / "docker" / "compose.env.example").read_text().splitlines()
        if line and not line.startswith("#")
    )
    return {key: value for key, value in pairs}


def interpolate(value: str, environ: dict[str, str]) -> str:
    """Compose's ``${VAR}``, ``${VAR:-default}`` and ``${VAR:?error}`` substitution."""

    def substitute(match: re.Match) -> str:
        name, kind, rest = match.groups()
        if environ.get(name):
            return environ[name]
        if kind == ":-":
            return rest
        raise AssertionError(f"${{{name}}} is required: {rest}")

    return VARIABLE.sub(substitute, value)


def filled_env() -> dict[str, str]:
    return {key: value or f"test-{key.lower()}" for key, value in example_env().items()}


def command(service: str) -> list[str]:
    spec = SERVICES[service]
    argv = [*(spec.get("entrypoint") or []), *(spec.get("command") or [])]
    return [interpolate(str(part), filled_env()) for part in argv]


def in_repo(container_path: str) -> Path:
    assert container_path.startswith(IN_IMAGE), f"{container_path} is not under {IN_IMAGE}"
    return REPO / container_path[len(IN_IMAGE) :]


def test_services_of_the_deployment():
    assert set(SERVICES) == {
        "postgres",
        "airflow-init",
        "airflow-api-server",
        "airflow-scheduler",
        "airflow-dag-processor",
        "spark-master",
        "spark-worker-1",
        "spark-worker-2",
        "speed-layer",
        "producer",
        "lklab",
    }
    assert SERVICES["lklab"]["profiles"] == ["tools"]


def test_the_image_is_the_repository():
    dockerfile = DOCKERFILE.read_text()
    assert "WORKDIR /opt/lklab\n" in dockerfile and "\nCOPY . .\n" in dockerfile
    for line in dockerfile.splitlines():
        if line.startswith("COPY ") and line != "COPY . .":
            for source in line.split()[1:-1]:
                assert (REPO / source).is_file(), f"Dockerfile copies {source}, which does not exist"
    for requirements in ("requirements.txt", "docker/requirements-compose.txt"):
        pins = [l for l in (REPO / requirements).read_text().splitlines() if l.strip() and not l.startswith("#")]
        assert pins and all(re.fullmatch(r"[A-Za-z0-9_.\-\[\]]+==[0-9][A-Za-z0-9.]*", p) for p in pins), pins
    compose_pins = (REPO / "docker" / "requirements-compose.txt").read_text()
    # Airflow's sync engine uses the URL's driver; its API server's async engine uses asyncpg.
    assert "psycopg2-binary==" in compose_pins and "asyncpg==" in compose_pins
    assert (REPO / "docker" / "Dockerfile.dockerignore").read_text().splitlines()[1:3] == [".git", ".venv"]


@pytest.mark.parametrize("service", sorted(SERVICES))
def test_images(service):
    spec = SERVICES[service]
    if service == "postgres":
        name, _, tag = spec["image"].partition(":")
        assert name == "postgres" and tag and tag != "latest"
        assert "build" not in spec
    else:
        assert spec["image"] == "lklab:latest"
        assert spec["build"] == {"context": ".", "dockerfile": "docker/Dockerfile"}


def test_airflow_commands_parse_with_the_installed_airflow(tmp_path):
    argvs = {service: command(service) for service in AIRFLOW_SERVICES}
    for service, argv in argvs.items():
        assert argv[0] == "/opt/lklab/docker/airflow-entrypoint.sh" and argv[1] == "airflow", (service, argv)
    script = (
        "import json, sys\n"
        "from airflow.cli.cli_parser import get_parser\n"
        "for argv in json.loads(sys.stdin.read()):\n"
        "    print(get_parser().parse_args(argv).func.__name__)\n"
    )
    env = {**os.environ, "AIRFLOW_HOME": str(tmp_path), "AIRFLOW__CORE__LOAD_EXAMPLES": "False"}
    done = subprocess.run(
        [sys.executable, "-c", script],
        input=json.dumps([a[2:] for a in argvs.values()]),
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert [argv[2:] for argv in argvs.values()] == [
        ["db", "migrate"],
        ["api-server"],
        ["scheduler"],
        ["dag-processor"],
    ]


def test_airflow_entrypoint_writes_the_login_from_the_environment(tmp_path):
    entrypoint = in_repo(command("airflow-api-server")[0])
    assert os.access(entrypoint, os.X_OK)
    env = {
        "PATH": os.environ["PATH"],
        "AIRFLOW_HOME": str(tmp_path),
        "AIRFLOW_ADMIN_USER": "ops",
        "AIRFLOW_ADMIN_PASSWORD": 'pa"ss word',
    }
    python_dir = str(Path(sys.executable).parent)
    env["PATH"] = f"{python_dir}{os.pathsep}{env['PATH']}"
    done = subprocess.run(
        [
            str(entrypoint),
            "sh",
            "-c",
            "echo $AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS $AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=30,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["ops:admin", str(tmp_path / "passwords.json")]
    assert json.loads((tmp_path / "passwords.json").read_text()) == {"ops": 'pa"ss word'}
    assert (tmp_path / "passwords.json").stat().st_mode & 0o077 == 0
    del env["AIRFLOW_ADMIN_PASSWORD"]
    refused = subprocess.run([str(entrypoint), "true"], capture_output=True, text=True, env=env, timeout=30)
    assert refused.returncode != 0 and "AIRFLOW_ADMIN_PASSWORD" in refused.stderr


def spark_class_exists(name: str) -> bool:
    jars = (Path(sys.executable).parent.parent / "lib").glob("python3*/site-packages/pyspark/jars/spark-core_*.jar")
    entry = name.replace(".", "/") + ".class"
    return any(entry in zipfile.ZipFile(jar).namelist() for jar in jars)


def test_spark_cluster_commands():
    master = command("spark-master")
    assert master[:2] == ["spark-class", "org.apache.spark.deploy.master.Master"]
    assert master[master.index("--host") + 1] == "spark-master" and master[master.index("--port") + 1] == "7077"
    assert spark_class_exists(master[1])
    for worker in ("spark-worker-1", "spark-worker-2"):
        argv = command(worker)
        assert argv[:2] == ["spark-class", "org.apache.spark.deploy.worker.Worker"] and spark_class_exists(argv[1])
        assert argv[-1] == MASTER
        assert (argv[argv.index("--cores") + 1], argv[argv.index("--memory") + 1]) == ("2", "2g")
    assert (Path(sys.executable).parent / "spark-class").is_file()


def test_speed_layer_is_spark_submit_of_the_repo_job_to_the_cluster():
    argv = command("speed-layer")
    assert argv[0] == "spark-submit" and argv[argv.index("--master") + 1] == MASTER
    assert argv[argv.index("--total-executor-cores") + 1] == "1"
    application = in_repo(argv[-1])
    assert application == REPO / "spark_jobs" / "speed_job.py" and application.is_file()
    assert "spark.pyspark.python=/usr/local/bin/python" in argv
    assert (Path(sys.executable).parent / "spark-submit").is_file()


def test_airflow_submits_to_the_same_cluster():
    for service in AIRFLOW_SERVICES:
        env = SERVICES[service]["environment"]
        assert env["AIRFLOW_CONN_SPARK_DEFAULT"] == MASTER
        assert env["AIRFLOW__CORE__EXECUTOR"] == "LocalExecutor"
        assert env["AIRFLOW__CORE__EXECUTION_API_SERVER_URL"] == "http://airflow-api-server:8080/execution/"
    assert SERVICES["lklab"]["environment"]["LKLAB_SPARK_MASTER"] == MASTER


def test_producer_flags_parse_with_its_own_parser():
    argv = command("producer")
    assert argv[0] == "python"
    script = in_repo(argv[1])
    spec = importlib.util.spec_from_file_location("compose_producer", script)
    producer = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(producer)
    parsed = producer._parser().parse_args(argv[2:])
    assert (parsed.scenario, parsed.events, parsed.span, parsed.speedup) == ("billing", 20000, "1h", 1.0)


def test_one_lake_volume_for_every_service_that_touches_the_lake():
    dockerfile = DOCKERFILE.read_text()
    assert "LKLAB_LAKE=/data/lake" in dockerfile
    for service in LAKE_SERVICES:
        assert SERVICES[service]["volumes"] == ["lake:/data"], service
        lake = SERVICES[service].get("environment", {}).get("LKLAB_LAKE", "/data/lake")
        assert lake == "/data/lake", service
    assert "lake" in COMPOSE["volumes"]
    assert SERVICES["airflow-scheduler"]["environment"]["LKLAB_EXPERIMENT_LAKE"].startswith("/data/")


def test_dag_folder_is_the_repository_dags():
    for service in AIRFLOW_SERVICES:
        dags = in_repo(SERVICES[service]["environment"]["AIRFLOW__CORE__DAGS_FOLDER"])
        assert dags == REPO / "dags"
    assert {path.stem for path in (REPO / "dags").glob("*.py")} >= {
        "batch_recompute",
        "reconciliation_days",  # the reconciliation DAG's file: named so it shadows no package
        "kappa_replay",
        "lambda_kappa_experiment",
        "speed_layer_health",
    }


CREDENTIALS = {
    "POSTGRES_USER",
    "POSTGRES_PASSWORD",
    "POSTGRES_DB",
    "AIRFLOW__CORE__FERNET_KEY",
    "AIRFLOW__API__SECRET_KEY",
    "AIRFLOW__API_AUTH__JWT_SECRET",
    "AIRFLOW_ADMIN_PASSWORD",
}


@pytest.mark.parametrize("service", sorted(SERVICES))
def test_credentials_come_from_required_environment_variables(service):
    env = SERVICES[service].get("environment", {})
    for key in CREDENTIALS & set(env):
        assert REQUIRED.fullmatch(env[key]), f"{service}: {key} must be ${{VAR:?message}}, not {env[key]!r}"
    if "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN" in env:
        url = env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"]
        assert re.fullmatch(
            r"postgresql\+psycopg2://\$\{POSTGRES_USER:\?[^}]+\}:\$\{POSTGRES_PASSWORD:\?[^}]+\}"
            r"@postgres:5432/\$\{POSTGRES_DB:\?[^}]+\}",
            url,
        ), url
    for key in env:
        if re.search(r"PASSWORD|SECRET|FERNET", key):
            assert key in CREDENTIALS, f"{service}: {key} is a credential the test does not know"


def test_every_variable_is_in_the_example_env():
    text = (REPO / "docker-compose.yml").read_text()
    used = set(VARIABLE.findall(text))
    required = {name for name, kind, _ in used if kind == ":?"}
    example = example_env()
    assert required <= set(example), f"not in docker/compose.env.example: {sorted(required - set(example))}"
    assert set(example) == {name for name, _, _ in used}
    secrets = {
        "POSTGRES_PASSWORD",
        "AIRFLOW_ADMIN_PASSWORD",
        "AIRFLOW_FERNET_KEY",
        "AIRFLOW_SECRET_KEY",
        "AIRFLOW_JWT_SECRET",
    }
    assert {key: example[key] for key in secrets} == dict.fromkeys(secrets, "")


def test_dependencies_name_services_and_postgres_is_checked():
    for service, spec in SERVICES.items():
        depends = spec.get("depends_on", [])
        assert set(depends) <= set(SERVICES), service
    assert SERVICES["postgres"]["healthcheck"]["test"][0] == "CMD-SHELL"
    for service in AIRFLOW_SERVICES:
        assert SERVICES[service]["depends_on"]["postgres"] == {"condition": "service_healthy"}
    for service in AIRFLOW_SERVICES[1:]:
        assert SERVICES[service]["depends_on"]["airflow-init"] == {"condition": "service_completed_successfully"}

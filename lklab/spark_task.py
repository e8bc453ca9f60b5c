"""The one way a DAG runs a Spark job: ``spark-submit spark_jobs/<job>.py`` through the
``spark_default`` connection.

* **Which spark-submit.** The project's own: the one installed next to the interpreter that runs
  the task (a venv's ``bin``, ``/usr/local/bin`` in the image), whatever ``PATH`` says. It is the
  Spark the jobs import, and it is there when the venv's ``bin`` is not on ``PATH``.
* **Which master.** ``spark_default`` when a connection of that name is configured
  (``AIRFLOW_CONN_SPARK_DEFAULT``, the metadata database, a secrets backend); when none is, the
  lab's own ``spark-master`` setting (``load_config``: default ``local[2]``), not the provider's
  fallback, which is YARN.
* **Crash or breach.** A job that exits with the task's ``breach_exit_code`` ran and found a
  problem (``reconcile_job`` exits 3 on an unexplained gap beyond ``--max-unexplained``):
  running it again finds the same problem, so the attempt fails at once, without retries
  (``AirflowFailException``), and the message says it is a breach, with the job's own verdict
  lines (those it prints as ``lklab <command>: ...``). Any other failure is a crash and keeps
  its retries.

Read from the environment when the DAG is parsed: ``LKLAB_SPARK_JOBS`` (where ``spark_jobs/`` is,
default: next to this package) and ``LKLAB_DELTA_SPARK_JARS`` (delta-spark jars, given to
``spark-submit --jars`` so the driver and the executors have them from the start). The lab's
configuration (``load_config``: file, then environment) is read only when a task runs, so a DAG
file imports nothing of Spark, Arrow or the configuration and a bad configuration fails the
task, not the DAG's import: the ``spark-master`` setting as above, and ``driver-memory`` as
``--driver-memory`` unless the task gives its own; in local mode the executors share the
driver's heap. Python runs the project's interpreter everywhere: ``spark.pyspark.python`` and,
for spark-submit itself, ``PYSPARK_DRIVER_PYTHON``.

The driver's JIT compilers are chosen when a task runs, as ``lklab`` chooses them for the
command a job runs (``spark_jobs/<command>_job.py``; ``lklab.cli.pipeline_jobs.ONE_JOB_COMMANDS``,
``shared.jvm_compilers``): the driver of ``reconcile_job`` stops at C1, and so does that of
``batch_job`` and ``replay_job`` while the log of the lake the job's arguments name is small.
The option is added to ``SPARK_SUBMIT_OPTS`` in the environment of that ``spark-submit``
(``one_job_env``), when the driver is the JVM it starts on this machine (not on YARN, Kubernetes
or in a standalone cluster's deploy mode), and unless the task's environment, the worker's or
``spark.driver.extraJavaOptions`` sets the JIT.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import sys
import sysconfig
from collections import deque
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook
from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk import Connection
from airflow.sdk.exceptions import AirflowException, AirflowFailException, AirflowNotFoundException

if TYPE_CHECKING:
    from shared.config import LabConfig

__all__ = [
    "spark_job",
    "mapped_spark_job",
    "spark_jobs_dir",
    "project_spark_submit",
    "one_job_env",
    "LabSparkSubmitOperator",
]

CONNECTION = "spark_default"
log = logging.getLogger(__name__)


def spark_jobs_dir() -> Path:
    """Where the jobs ``spark-submit`` runs are: ``LKLAB_SPARK_JOBS`` or the repository's."""
    return Path(os.environ.get("LKLAB_SPARK_JOBS") or Path(__file__).resolve().parents[1] / "spark_jobs")


def _lab_config() -> LabConfig:
    """The lab's configuration (``shared.config.load_config``), loaded when a task runs: its
    module imports Spark and Arrow, which a DAG file must not."""
    from shared.config import load_config

    return load_config()


def project_spark_submit() -> str:
    """The ``spark-submit`` installed with this interpreter's pyspark (its scripts directory,
    or the directory of the interpreter itself); ``spark-submit`` from ``PATH`` if neither has one."""
    for directory in (sysconfig.get_path("scripts"), os.path.dirname(sys.executable)):
        candidate = Path(directory) / "spark-submit"
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return "spark-submit"


def _lake_of(command: str, arguments: list[str]) -> Path | None:
    """The lake ``lklab COMMAND ARGUMENTS`` would read (None: arguments it would refuse)."""
    from lklab.cli import parse
    from lklab.cli.console import UsageError
    from lklab.cli.options import config_from

    try:
        with contextlib.redirect_stderr(io.StringIO()):  # the job says what is wrong with them
            args = parse([command, *arguments])
        return config_from(args).lake
    except (SystemExit, UsageError):
        return None


def one_job_env(application: str, arguments: list[str], env_vars: dict[str, Any] | None, conf: dict[str, Any] | None):
    """``env_vars`` for a ``spark-submit`` of ``application`` with ``arguments`` whose driver it
    starts here: with ``SPARK_SUBMIT_OPTS`` (the task's, else the worker's) followed by the JIT
    setting of a one-job command's driver when ``shared.jvm_compilers.one_job_options`` gives
    one (the task's ``JAVA_TOOL_OPTIONS`` and ``spark.driver.extraJavaOptions`` are read too),
    else as they are."""
    from lklab.cli.pipeline_jobs import ONE_JOB_COMMANDS
    from shared.jvm_compilers import one_job_options

    command = Path(application).stem.removesuffix("_job")
    if command not in ONE_JOB_COMMANDS:
        return env_vars
    task = env_vars or {}
    given = str(task.get("SPARK_SUBMIT_OPTS", os.environ.get("SPARK_SUBMIT_OPTS", "")))
    others = f"{task.get('JAVA_TOOL_OPTIONS', '')} {(conf or {}).get('spark.driver.extraJavaOptions', '')}"
    lake = _lake_of(command, [str(a) for a in arguments or []]) if ONE_JOB_COMMANDS[command] else None
    if ONE_JOB_COMMANDS[command] and lake is None:
        return env_vars
    extra = one_job_options(f"{given} {others}", lake)
    if extra is None:
        return env_vars
    return {**task, "SPARK_SUBMIT_OPTS": f"{given} {extra}".strip()}


class LabSparkSubmitHook(SparkSubmitHook):
    """``SparkSubmitHook`` with the lab's local master when no connection is configured, and a
    breach exit code that fails the attempt for good."""

    def __init__(self, *, breach_exit_code: int | None = None, **kwargs: Any) -> None:
        self.breach_exit_code = breach_exit_code
        self.verdict: deque[str] = deque(maxlen=20)
        super().__init__(**kwargs)

    @classmethod
    def get_connection(cls, conn_id: str) -> Connection:
        try:
            return super().get_connection(conn_id)
        except AirflowNotFoundException:
            master = _lab_config().spark_master
            log.info(
                "no %r connection is configured: Spark runs on %s (the lab's spark-master setting)", conn_id, master
            )
            return Connection(conn_id=conn_id, conn_type="spark", host=master)

    def _process_spark_submit_log(self, itr: Iterator[Any]) -> None:
        super()._process_spark_submit_log(self._keep_verdict(itr))

    def _keep_verdict(self, lines: Iterator[Any]) -> Iterator[Any]:
        for line in lines:
            if str(line).startswith("lklab "):
                self.verdict.append(str(line).strip())
            yield line

    def _build_spark_submit_command(self, application: str) -> list[str]:
        if not (self._is_yarn or self._is_kubernetes) and self._connection["deploy_mode"] != "cluster":
            self._env_vars = one_job_env(application, self._application_args, self._env_vars, self._conf)
        return super()._build_spark_submit_command(application)

    def submit(self, application: str = "", **kwargs: Any) -> str | None:
        try:
            return super().submit(application, **kwargs)
        except AirflowException:
            code = self._submit_sp.returncode if self._submit_sp is not None else None
            if code is None or code != self.breach_exit_code:
                raise
            said = "; ".join(self.verdict) or "(the job printed no verdict line; see its output above)"
            raise AirflowFailException(
                f"BREACH: {Path(application).name} ran and found a problem (exit {code}); a breach fails "
                f"at once, without retries: {said}"
            ) from None


class LabSparkSubmitOperator(SparkSubmitOperator):
    """``SparkSubmitOperator`` running ``LabSparkSubmitHook`` (``breach_exit_code``: the job's
    exit code for "ran and found a problem"; None: every failure is a crash)."""

    def __init__(self, *, breach_exit_code: int | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.breach_exit_code = breach_exit_code

    def _get_hook(self) -> LabSparkSubmitHook:
        # The provider's own _get_hook, building the lab's hook (the same arguments, in its order),
        # with the lab's driver-memory setting unless the task gives its own.
        return LabSparkSubmitHook(
            breach_exit_code=self.breach_exit_code,
            conf=self.conf,
            conn_id=self._conn_id,
            files=self.files,
            py_files=self.py_files,
            archives=self._archives,
            driver_class_path=self.driver_class_path,
            jars=self.jars,
            java_class=self._java_class,
            packages=self.packages,
            exclude_packages=self.exclude_packages,
            repositories=self._repositories,
            total_executor_cores=self._total_executor_cores,
            executor_cores=self._executor_cores,
            executor_memory=self._executor_memory,
            driver_memory=self._driver_memory or _lab_config().driver_memory,
            keytab=self.keytab,
            principal=self.principal,
            proxy_user=self.proxy_user,
            name=self.name,
            num_executors=self._num_executors,
            status_poll_interval=self._status_poll_interval,
            application_args=self.application_args,
            env_vars=self.env_vars,
            verbose=self._verbose,
            spark_binary=self._spark_binary,
            properties_file=self.properties_file,
            yarn_queue=self._yarn_queue,
            deploy_mode=self._deploy_mode,
            use_krb5ccache=self._use_krb5ccache,
            post_submit_commands=self.post_submit_commands,
            track_driver_via_k8s_api=self._track_driver_via_k8s_api,
            yarn_track_via_rm_api=self._yarn_track_via_rm_api,
            yarn_rm_auth=self._yarn_rm_auth,
        )


def _arguments(task_id: str, job: str, operator_args: dict[str, Any]) -> dict[str, Any]:
    return {
        "task_id": task_id,
        "application": str(spark_jobs_dir() / f"{job}.py"),
        "conn_id": CONNECTION,
        "spark_binary": project_spark_submit(),
        "conf": {"spark.pyspark.python": sys.executable},
        # find-spark-home runs this to locate pyspark: without it, whatever python3 PATH has.
        "env_vars": {"PYSPARK_DRIVER_PYTHON": sys.executable},
        "jars": os.environ.get("LKLAB_DELTA_SPARK_JARS") or None,
        **operator_args,
    }


def spark_job(task_id: str, job: str, application_args: list[str], **operator_args: Any) -> LabSparkSubmitOperator:
    """The task running ``spark_jobs/<job>.py APPLICATION_ARGS``; ``operator_args`` go to the
    operator (``breach_exit_code``, ``outlets``, ``execution_timeout``, ...)."""
    return LabSparkSubmitOperator(**_arguments(task_id, job, {"application_args": application_args, **operator_args}))


def mapped_spark_job(task_id: str, job: str, application_args: Any, **operator_args: Any):
    """One task instance per element of ``application_args`` (an ``XComArg`` of argument lists):
    dynamic task mapping of ``spark_jobs/<job>.py``."""
    return LabSparkSubmitOperator.partial(**_arguments(task_id, job, operator_args)).expand(
        application_args=application_args
    )

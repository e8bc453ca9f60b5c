"""Console output and exit codes of the ``lklab`` commands."""

from __future__ import annotations

import logging
import sys
from contextlib import contextmanager

from lklab.progress import CurrentStderr

USAGE, FAILURE, UNHEALTHY = 2, 1, 3


class UsageError(Exception):
    """Bad input from the user: reported in one line, exit code 2."""


log = logging.getLogger("lklab")


def progress(message: str) -> None:
    """A message about the work under way: a ``[HH:MM:SS] message`` line on stderr, through
    ``logging`` (``lklab.progress.configure_logging``, set up by ``main``)."""
    log.info(message)


def machine_records(name: str) -> None:
    """Print the records of logger ``name`` (one JSON object each, e.g. a stream's line per
    micro-batch) on stderr as ``<time> <name> <record>``, so a log shipper can pick them out by
    name; they do not also go through the lab's ``[HH:MM:SS]`` messages. Idempotent."""
    records = logging.getLogger(name)
    if not any(getattr(h, "_lklab_machine", False) for h in records.handlers):
        handler = CurrentStderr()
        handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(message)s"))
        handler._lklab_machine = True
        records.addHandler(handler)
    records.setLevel(logging.INFO)
    records.propagate = False


def unexplained(differences: int, why: str = "") -> int:
    """The exit code of a reconciliation with ``differences`` it cannot explain: 0 when there are
    none, else ``UNHEALTHY`` after the verdict line an orchestrator quotes (``lklab.spark_task``
    keeps the lines starting ``lklab ``), ``why`` appended in parentheses."""
    if not differences:
        return 0
    print(f"lklab reconcile: UNEXPLAINED: {differences:,} differences" + (f" ({why})" if why else ""), file=sys.stderr)
    return UNHEALTHY


def command_session(config, app_name: str, one_job: bool = False, log_bound: bool = False):
    """``(session, stop)``: the Spark session a command runs in and what ends it.

    A command that starts Spark stops it when it ends (``stop``); one called where a session
    already runs (``main`` called in a process that has one) uses that session and leaves it
    running (``stop`` does nothing). ``one_job``: the command runs one job and exits;
    ``log_bound``: its work grows with the log (``shared.spark_session``).
    """
    from pyspark import SparkContext

    from shared.spark_session import spark_session

    started_here = SparkContext._active_spark_context is None
    spark = spark_session(config, app_name, one_job=one_job, log_bound=log_bound)
    return spark, (spark.stop if started_here else lambda: None)


@contextmanager
def spark_for(config, app_name: str, *refused: type[Exception], one_job: bool = False, log_bound: bool = False):
    """A Spark session for one command, stopped when it ends if the command started it.

    ``one_job``, ``log_bound``: as ``command_session`` takes them. The errors in ``refused`` (and
    a contradiction of the tables' settings) are bad input, exit 2, not failures.
    """
    from shared.table_settings import SettingsConflict

    spark, stop = command_session(config, app_name, one_job, log_bound)
    try:
        yield spark
    except (SettingsConflict, *refused) as err:
        raise UsageError(str(err)) from None
    finally:
        stop()

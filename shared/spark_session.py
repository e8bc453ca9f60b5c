"""The SparkSession every command and job uses.

Python workers must run the project's interpreter whatever shell started the driver, so the
session pins ``spark.pyspark.python`` (and ``PYSPARK_PYTHON`` for local mode) to
``sys.executable``. Timestamps are UTC (``spark.sql.session.timeZone``): event times in the
log carry offsets, and windows are aligned in UTC. Cached frames are kept uncompressed (see
below). The log source is registered by its readers (``shared.log_source.log_reader``), not here.
When the table engine is delta-spark, its jars and SQL extension are added here. A JVM this
process starts maps the installation's class-data archive when there is one
(``shared.jvm_archive``): it starts seconds sooner, and computes the same. A command that runs
one job and exits asks for ``one_job`` (with ``log_bound`` when its work grows with the log):
the JVM it starts compiles with C1 alone (``shared.jvm_compilers``).

Under ``spark-submit`` (which starts the JVM first and tells Python its gateway port), the
master given to ``spark-submit`` wins; ``spark-master`` applies to sessions started from Python.
"""

from __future__ import annotations

import os
import sys

from pyspark import SparkContext
from pyspark.sql import SparkSession

from shared.config import LabConfig
from shared.jvm_archive import driver_java_options
from shared.jvm_compilers import one_job_options
from shared.tables import delta_spark_jars, resolve_engine

__all__ = ["spark_session"]


def spark_session(
    config: LabConfig, app_name: str = "lklab", *, one_job: bool = False, log_bound: bool = False
) -> SparkSession:
    """Return the active session, or build one for ``config`` (master, engine, UTC).

    With ``one_job``, a JVM started for it compiles with C1 alone (``shared.jvm_compilers``;
    with ``log_bound``, only while the lake's log is small).
    """
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    builder, compilers = SparkSession.builder, None
    if not os.environ.get("PYSPARK_GATEWAY_PORT"):
        # This process starts the JVM: its heap is ours to size (under spark-submit it is not).
        builder = builder.master(config.spark_master).config("spark.driver.memory", config.driver_memory)
        java_options = driver_java_options()
        if java_options:
            # spark-submit passes these to the JVM beside spark.driver.extraJavaOptions, which
            # stays the user's
            os.environ["SPARK_SUBMIT_OPTS"] = f"{os.environ.get('SPARK_SUBMIT_OPTS', '')} {java_options}".strip()
        if one_job and SparkContext._gateway is None:  # the JVM starts now, for this command alone
            compilers = one_job_options(os.environ.get("SPARK_SUBMIT_OPTS", ""), config.lake if log_bound else None)
    builder = (
        builder.appName(app_name)
        .config("spark.pyspark.python", sys.executable)
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        # Cached frames (the parsed log, the copies of repeated ids, a reconciliation's windows)
        # are read a few times each, soon after they are built: building a dictionary of every
        # distinct id to compress them cost more CPU than reading them uncompressed saves.
        .config("spark.sql.inMemoryColumnarStorage.compressed", "false")
        # With it on, every call of a pyspark.sql function first asks the JVM for the active
        # session and its settings and records the Python call site there: about 5,800 of the
        # 10,000 JVM calls that building the log parser's columns makes. It only adds the Python
        # line to the rare runtime error that carries a DataFrame context.
        .config("spark.python.sql.dataFrameDebugging.enabled", "false")
    )
    if resolve_engine(config.table_engine) == "delta-spark":
        builder = (
            builder.config("spark.jars", ",".join(delta_spark_jars()))
            .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
            .config("spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog")
        )
    given = os.environ.get("SPARK_SUBMIT_OPTS")
    if compilers:  # for this JVM only, not for the processes this one starts later
        os.environ["SPARK_SUBMIT_OPTS"] = f"{given or ''} {compilers}".strip()
    try:
        spark = builder.getOrCreate()
    finally:
        if compilers and given is None:
            os.environ.pop("SPARK_SUBMIT_OPTS")
        elif compilers:
            os.environ["SPARK_SUBMIT_OPTS"] = given
    spark.sparkContext.setLogLevel("ERROR")
    return spark

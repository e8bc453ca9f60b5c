"""A class-data-sharing archive of the classes a Spark driver loads, for the JVMs the tests start.

Every ``lklab``, ``spark-submit`` and Airflow task process the suite starts begins with a cold
JVM that loads and verifies several thousand classes from Spark's jars before the job does
anything. A dynamic CDS archive (``-XX:ArchiveClassesAtExit``, JDK 13+) holds them already
parsed and verified: a JVM given ``-XX:SharedArchiveFile`` maps it instead. It changes how
classes are loaded, not which: a JVM whose class path does not match the archive's (another
Java, other jars) ignores it (``-Xlog:cds=off`` keeps that quiet) and loads from the jars as
before.

The archive is written once by a small driver (``spark-submit`` of ``DUMP``: a session as the lab
builds it, a streaming query over a tiny log, a batch recompute, Arrow in and out) and kept under
the temporary directory, named after the Java runtime, the Spark jars and the JVM options, so a
later run on the same machine reuses it.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from shared.jvm_archive import QUIET

DUMP = """
import sys, tempfile
from pathlib import Path
from lklab.pipelines.billing_windows.batch import run_batch
from lklab.pipelines.billing_windows.generator import GeneratorParams, generate
from lklab.pipelines.billing_windows.speed import run_speed
from shared.config import LabConfig
from shared.spark_session import spark_session

with tempfile.TemporaryDirectory() as scratch:
    config = LabConfig(lake=Path(scratch), table_engine="deltalake")
    generate(GeneratorParams(events=60, accounts=2, span=3_600_000_000, segment_interval=1_200_000_000), config.lake)
    spark = spark_session(config, "lklab-cds-archive")
    run_speed(spark, config, available_now=True)
    run_batch(spark, config)
    spark.createDataFrame([(1, "a")], "x long, y string").toPandas()
    spark.stop()
"""


def _key(options: str) -> str:
    import pyspark

    jars = Path(pyspark.__file__).parent / "jars"
    java = subprocess.run(["java", "-version"], capture_output=True, text=True, timeout=60).stderr
    listing = sorted(f"{p.name}:{p.stat().st_size}" for p in jars.glob("*.jar"))
    return hashlib.sha256("\n".join([java, options, str(jars), *listing]).encode()).hexdigest()[:16]


def archive_options(options: str, repo: Path) -> str:
    """``options`` with ``-XX:SharedArchiveFile`` added, the archive written first if need be;
    ``options`` alone when it cannot be written (no Java, a JDK without dynamic archives)."""
    try:
        archive = Path(tempfile.gettempdir()) / f"lklab-tests-jvm-{_key(options)}.jsa"
        if not archive.exists():
            partial = archive.with_suffix(f".{os.getpid()}.part")
            env = {
                **os.environ,
                "SPARK_SUBMIT_OPTS": f"{options} {QUIET} -XX:ArchiveClassesAtExit={partial}",
                "PYTHONPATH": os.pathsep.join(filter(None, [str(repo), os.environ.get("PYTHONPATH")])),
                "PYSPARK_PYTHON": sys.executable,
            }
            spark_submit = Path(sys.executable).parent / "spark-submit"
            with tempfile.TemporaryDirectory(prefix="lklab-cds-") as scratch:
                script = Path(scratch) / "dump.py"
                script.write_text(DUMP)
                # spark-submit execs the JVM: it has written the archive when this returns
                done = subprocess.run(
                    [str(spark_submit), "--master", "local[2]", str(script)],
                    env=env,
                    capture_output=True,
                    timeout=600,
                    stdin=subprocess.DEVNULL,
                )
            if done.returncode != 0 or not partial.exists():
                partial.unlink(missing_ok=True)
                return options
            partial.replace(archive)
        return f"{options} {QUIET} -XX:SharedArchiveFile={archive}"
    except (OSError, subprocess.SubprocessError):
        return options

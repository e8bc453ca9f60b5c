"""The class-data-sharing archive the JVMs the tests start map: the installation's.

Every ``lklab``, ``spark-submit`` and Airflow task process the suite starts begins with a cold
JVM that loads and verifies several thousand classes from Spark's jars before the job does
anything. The installation's archive (``shared.jvm_archive.ARCHIVE``, written by ``make
install``: ``lklab.class_archive``) holds them already parsed and verified, and a JVM given
``-XX:SharedArchiveFile`` maps it instead, with the tests' own JIT and collector options too. It
changes how classes are loaded, not which: a JVM that cannot use it (another Java, other jars)
ignores it (``QUIET`` keeps that quiet) and loads from the jars as before. Where the
installation has none (a venv not built by ``make install``), it is written first.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from shared.jvm_archive import ARCHIVE, QUIET


def archive_options(options: str, repo: Path) -> str:
    """``options`` with ``-XX:SharedArchiveFile`` added, the archive written first if need be;
    ``options`` alone when it cannot be written (no Java, a JDK without dynamic archives)."""
    try:
        if not ARCHIVE.exists():
            env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(repo), os.environ.get("PYTHONPATH")]))}
            env.pop("SPARK_SUBMIT_OPTS", None)
            subprocess.run(
                [sys.executable, "-m", "lklab.class_archive"],
                env=env,
                capture_output=True,
                timeout=600,
                stdin=subprocess.DEVNULL,
            )
            if not ARCHIVE.exists():
                return options
        return f"{options} {QUIET} -XX:SharedArchiveFile={ARCHIVE}"
    except (OSError, subprocess.SubprocessError):
        return options

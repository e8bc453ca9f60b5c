"""The driver JVM's class-data archive: Spark's classes mapped from one file, not loaded jar by jar.

A session started from Python starts a JVM that loads, parses and verifies thousands of classes
from Spark's jars before its first job, and more as each kind of plan is first analysed; on two
cores that is seconds at the start of every command. Java's class-data sharing (CDS) keeps the
classes one run loaded, already parsed and verified, in an archive that a later JVM maps from
disk (``-XX:SharedArchiveFile``). ``ARCHIVE`` is this installation's: ``lklab.class_archive``
writes it once (``make install`` does) by running a speed layer, a batch, a replay and a
reconcile over a small log in a JVM started with ``-XX:ArchiveClassesAtExit``.

``driver_java_options`` gives the options a session's driver starts with: the archive when it
exists, else none (``LKLAB_WRITE_CLASS_ARCHIVE``: the archiving run's, which writes one there);
none either when ``SPARK_SUBMIT_OPTS`` names an archive of its own (the tests' JVMs do).
A JVM that cannot use the archive (another Java, another class path, another heap layout)
ignores it and loads the classes from the jars as before: the archive changes how fast a
session starts, never what it computes. The JVM's messages about it are off either way.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pyspark

__all__ = ["ARCHIVE", "QUIET", "WRITE_ARCHIVE", "driver_java_options"]

ARCHIVE = Path(sys.prefix) / "share" / "lklab" / f"spark-{pyspark.__version__}-classes.jsa"
WRITE_ARCHIVE = "LKLAB_WRITE_CLASS_ARCHIVE"  # the path an archiving run writes its archive to
# the JVM says nothing of an archive it writes, maps or cannot use
QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off -Xlog:class+path=off"


def driver_java_options(archive: Path = ARCHIVE) -> str | None:
    """The driver JVM's options for class-data sharing, to add to ``SPARK_SUBMIT_OPTS``: write an
    archive where ``LKLAB_WRITE_CLASS_ARCHIVE`` says, else map ``archive`` when it exists; None
    when ``SPARK_SUBMIT_OPTS`` names an archive already."""
    given = os.environ.get("SPARK_SUBMIT_OPTS", "")
    target = os.environ.get(WRITE_ARCHIVE)
    if target and "-XX:ArchiveClassesAtExit=" not in given:
        return f"-XX:ArchiveClassesAtExit={target} {QUIET}"
    if "-XX:SharedArchiveFile=" in given or "-XX:ArchiveClassesAtExit=" in given:
        return None  # the caller's, or added by an earlier session of this process
    return f"-XX:SharedArchiveFile={archive} {QUIET}" if archive.is_file() else None

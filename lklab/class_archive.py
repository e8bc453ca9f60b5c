"""``python -m lklab.class_archive``: write the driver JVM's class-data archive (``shared.jvm_archive``).

A child process generates a small log in a scratch lake and runs ``lklab speed
--available-now``, ``lklab batch``, ``lklab replay`` and ``lklab reconcile`` on it in one
process, whose JVM was started with ``-XX:ArchiveClassesAtExit`` (and ``RECORDING_JVM``); it
then stops the JVM and waits for it, and the JVM writes every class those commands loaded as it
exits. The archive replaces ``ARCHIVE`` in one rename, so a session starting meanwhile maps the
old one or the new one, never half of one. ``make install`` runs it; run it again after changing
Java. Without an archive every command still runs, only its JVM starts slower.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

from shared.jvm_archive import ARCHIVE, WRITE_ARCHIVE
from shared.jvm_compilers import sets_jit

__all__ = ["main"]

# The recording JVM's compiler and collector: C1 alone and the serial collector, which leave the two
# cores to the commands (80 CPU s against 134 with the defaults, 96 s of wall against 107). An
# archive holds classes, not compiled code or a heap: a JVM with the default compilers and
# collector maps it the same (``-Xlog:cds`` shows its dynamic regions mapped).
RECORDING_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def recording_options(given: str) -> str:
    """``SPARK_SUBMIT_OPTS`` for the recording JVM: ``given`` and each ``RECORDING_JVM`` option
    whose setting ``given`` leaves open (a JVM told two collectors refuses to start; a JIT
    setting of the caller's is kept, ``shared.jvm_compilers.sets_jit``)."""
    compilers, collector = RECORDING_JVM.split()
    added = [] if sets_jit(given) else [compilers]
    return " ".join([*given.split(), *added, *([] if "GC" in given else [collector])])


def _record(lake: str) -> int:
    """The child: the commands in one session, then the JVM stopped and waited for."""
    from pyspark import SparkContext

    from lklab.cli import main as lklab

    commands = (
        ["generate", "--events", "200", "--span", "1h", "--segment-interval", "20m"],  # three segments
        ["speed", "--available-now", "--quiet"],
        ["batch"],
        ["replay", "--name", "archive"],
        ["reconcile"],
    )
    for command in commands:
        code = lklab([*command, "--lake", lake])
        if code not in (0, 3):  # 3: the run worked and found a gap, as a generated log's late events make
            print(f"lklab {command[0]} exited {code}: no archive", file=sys.stderr)
            return 1
    gateway = SparkContext._gateway  # each command stopped its session; the JVM is still up
    if gateway is None:
        print("no JVM was started: no archive", file=sys.stderr)
        return 1
    jvm = gateway.proc
    jvm.stdin.close()  # the JVM exits when its standard input closes, and writes the archive then
    return jvm.wait(timeout=600)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--record"]:
        return _record(argv[1])
    ARCHIVE.parent.mkdir(parents=True, exist_ok=True)
    written = ARCHIVE.with_name(f".{ARCHIVE.name}.{os.getpid()}")  # beside it: the rename stays on one disk
    with tempfile.TemporaryDirectory(prefix="lklab-class-archive-") as scratch:
        options = recording_options(os.environ.get("SPARK_SUBMIT_OPTS", ""))
        env = {**os.environ, WRITE_ARCHIVE: str(written), "SPARK_SUBMIT_OPTS": options}
        print(
            f"recording the classes of a speed layer, a batch, a replay and a reconcile into {ARCHIVE} ...", flush=True
        )
        child = subprocess.run(
            [sys.executable, "-m", "lklab.class_archive", "--record", str(Path(scratch) / "lake")],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        if child.returncode != 0 or not written.is_file():
            written.unlink(missing_ok=True)
            print(f"no class-data archive written (exit {child.returncode}): {child.stderr[-2000:]}", file=sys.stderr)
            return 1
        os.replace(written, ARCHIVE)
    print(f"wrote {ARCHIVE} ({ARCHIVE.stat().st_size / 2**20:,.0f} MiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

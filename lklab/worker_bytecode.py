"""``python -m lklab.worker_bytecode``: put pyspark's bytecode in the ``pyspark.zip`` its workers import.

Every Python process a Spark JVM starts (the daemon that forks the task workers, the runner of a
Python streaming source such as the log's, a ``spark-submit`` driver) has Spark's
``python/lib/pyspark.zip`` first on its path, so it imports pyspark from that zip, not from the
installed package. The zip holds sources only, and Python cannot cache bytecode in a zip: each
such process compiles the modules it imports again, about a second on two cores (importing the
log source's modules: 1.5 s from the zip, 0.5 s from the installed package). So every live query
waited that long for its source before its first micro-batch.

``precompile(zip)`` writes the same zip with each module's bytecode beside its source
(``name.pyc`` next to ``name.py``, where Python's zip importer looks first), compiled by this
interpreter and checked against the source's hash at import: a process of another Python version,
or a source that differs, compiles the source as before. Nothing else changes: the same entries,
the same modules. It replaces the zip in one rename and leaves a zip that holds bytecode already
as it is. ``make install`` runs it on this installation's pyspark; run it again after reinstalling
pyspark.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import zipfile
from importlib import _bootstrap_external
from pathlib import Path

import pyspark

__all__ = ["WORKER_ZIP", "precompile", "main"]

WORKER_ZIP = Path(pyspark.__file__).parent / "python" / "lib" / "pyspark.zip"


def _bytecode(archive: Path, name: str, source: bytes) -> bytes:
    """The hash-checked ``.pyc`` of ``source``, compiled under the name the zip importer gives it."""
    code = compile(source, str(archive / name), "exec", dont_inherit=True)
    return bytes(_bootstrap_external._code_to_hash_pyc(code, importlib.util.source_hash(source), checked=True))


def precompile(archive: Path) -> int:
    """Add to ``archive`` the bytecode of every ``.py`` entry that has none; returns how many
    modules were compiled (0: the zip is left untouched)."""
    archive = Path(archive)
    with zipfile.ZipFile(archive) as zipped:
        entries = zipped.infolist()
        names = {entry.filename for entry in entries}
        missing = {e.filename for e in entries if e.filename.endswith(".py") and e.filename + "c" not in names}
        if not missing:
            return 0
        written = archive.with_name(f".{archive.name}.{os.getpid()}")  # beside it: the rename stays on one disk
        try:
            with zipfile.ZipFile(written, "w", zipfile.ZIP_DEFLATED) as out:
                for entry in entries:
                    data = zipped.read(entry)
                    out.writestr(entry, data)
                    if entry.filename in missing:
                        compiled = zipfile.ZipInfo(entry.filename + "c", entry.date_time)
                        compiled.compress_type = zipfile.ZIP_DEFLATED
                        out.writestr(compiled, _bytecode(archive, entry.filename, data))
            os.replace(written, archive)
        finally:
            written.unlink(missing_ok=True)
    return len(missing)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    archive = Path(argv[0]) if argv else WORKER_ZIP
    if not archive.is_file():
        print(f"no {archive}: Spark's Python processes import pyspark from elsewhere", file=sys.stderr)
        return 0
    compiled = precompile(archive)
    print(f"{archive}: {compiled:,} modules compiled" if compiled else f"{archive}: holds its bytecode already")
    return 0


if __name__ == "__main__":
    sys.exit(main())

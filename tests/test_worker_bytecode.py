"""``lklab.worker_bytecode``: the pyspark.zip Spark's Python processes import carries its bytecode,
so they import it without compiling, and import exactly what its sources say."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

from lklab.worker_bytecode import WORKER_ZIP, precompile

SOURCES = {
    "pkg/__init__.py": "VALUE = 1\n",
    "pkg/mod.py": "def f():\n    return 42\n",
    "top.py": "from pkg.mod import f\n\nANSWER = f() + 1\n",
    "pkg/data.txt": "not a module\n",
}

# Imports the modules named in argv[1] (JSON) with argv[2] first on the path, as a Spark worker
# imports pyspark, counting the modules' sources Python had to compile on the way (not the code
# that modules build with exec, such as named tuples').
IMPORT_COUNTING_COMPILES = """
import builtins, importlib, json, sys
sys.path.insert(0, sys.argv[2])
compiled = []
_compile = builtins.compile
builtins.compile = lambda source, filename, *a, **k: (str(filename).endswith(".py") and compiled.append(filename), _compile(source, filename, *a, **k))[1]
values = {name: getattr(importlib.import_module(name), attribute) for name, attribute in json.loads(sys.argv[1])}
builtins.compile = _compile
print(json.dumps({"values": {k: v for k, v in values.items() if isinstance(v, int)}, "compiled": compiled}))
"""


def imported(archive: Path, names: list[tuple[str, str]]) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", IMPORT_COUNTING_COMPILES, json.dumps(names), str(archive)],
        capture_output=True,
        text=True,
        check=True,
        cwd="/",
    )
    return json.loads(done.stdout)


def make_zip(path: Path, sources: dict[str, str]) -> Path:
    with zipfile.ZipFile(path, "w") as out:
        for name, text in sources.items():
            out.writestr(zipfile.ZipInfo(name, (2026, 11, 28, 12, 0, 0)), text)
    return path


def entries(path: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(path) as zipped:
        return {name: zipped.read(name) for name in zipped.namelist()}


def test_each_module_gets_its_bytecode_beside_it_and_imports_without_compiling(tmp_path):
    archive = make_zip(tmp_path / "lib.zip", SOURCES)
    before = entries(archive)
    modules = [("pkg", "VALUE"), ("pkg.mod", "f"), ("top", "ANSWER")]
    plain = imported(archive, modules)
    assert plain["values"] == {"pkg": 1, "top": 43}
    assert sorted({Path(f).name for f in plain["compiled"]}) == ["__init__.py", "mod.py", "top.py"]

    assert precompile(archive) == 3
    after = entries(archive)
    assert {k: v for k, v in after.items() if k in before} == before  # every entry as it was
    assert sorted(set(after) - set(before)) == ["pkg/__init__.pyc", "pkg/mod.pyc", "top.pyc"]
    assert imported(archive, modules) == {"values": {"pkg": 1, "top": 43}, "compiled": []}

    written = archive.read_bytes()
    assert precompile(archive) == 0 and archive.read_bytes() == written  # a second run changes nothing
    assert not [p.name for p in tmp_path.iterdir() if p.name != "lib.zip"]  # no scratch file left


def test_a_source_that_differs_from_its_bytecode_is_compiled_and_imported_as_written(tmp_path):
    archive = make_zip(tmp_path / "lib.zip", SOURCES)
    precompile(archive)
    edited = {**entries(archive), "pkg/mod.py": b"def f():\n    return 7\n"}  # the old pkg/mod.pyc kept
    with zipfile.ZipFile(archive, "w") as out:
        for name, data in edited.items():
            out.writestr(zipfile.ZipInfo(name, (2026, 11, 28, 12, 0, 0)), data)
    result = imported(archive, [("top", "ANSWER")])
    assert result["values"] == {"top": 8}
    assert {Path(f).name for f in result["compiled"]} == {"mod.py"}


def test_the_installed_worker_zip_holds_the_bytecode_of_every_module():
    """``make install`` ran ``python -m lklab.worker_bytecode`` on this installation's pyspark."""
    names = set(entries(WORKER_ZIP))
    sources = {name for name in names if name.endswith(".py")}
    assert len(sources) > 1000 and {name + "c" for name in sources} <= names
    result = imported(
        WORKER_ZIP, [("pyspark", "__version__"), ("pyspark.sql.streaming.python_streaming_source_runner", "__name__")]
    )
    assert result["compiled"] == []

"""Imports point one way: ``dags/`` and ``spark_jobs/`` -> ``lklab/`` -> ``reconciliation/`` ->
``shared/``; and no pipeline's package (``lklab/pipelines/<name>/``) imports another's, not even
through the registry. The contract is import-linter's (``.importlinter`` at the top of the repository);
these tests run it on the code as it is, and on a copy with one import reversed."""

import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LINT_IMPORTS = str(Path(sys.executable).parent / "lint-imports")
PACKAGES = ("dags", "spark_jobs", "lklab", "reconciliation", "shared")


def lint(root: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [LINT_IMPORTS, "--no-cache"],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(root)},
    )


def test_the_code_keeps_the_layers():
    done = lint(REPO)
    assert done.returncode == 0, done.stdout[-3000:]
    assert "Contracts: 2 kept, 0 broken." in done.stdout


def copy_code(tmp_path: Path) -> None:
    for package in PACKAGES:
        shutil.copytree(REPO / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / ".importlinter", tmp_path)


def test_a_reversed_import_breaks_the_contract(tmp_path):
    copy_code(tmp_path)
    windows = tmp_path / "shared" / "windows.py"
    windows.write_text(
        windows.read_text()
        + "\n\ndef _reversed():\n    from reconciliation.fold import fold_late_events  # noqa: F401\n"
    )
    done = lint(tmp_path)
    assert done.returncode == 1
    assert "Contracts: 1 kept, 1 broken." in done.stdout
    assert "shared.windows -> reconciliation.fold" in done.stdout


def test_a_pipeline_importing_another_breaks_their_independence(tmp_path):
    copy_code(tmp_path)
    rule = tmp_path / "lklab" / "pipelines" / "order_payments" / "rule.py"
    rule.write_text(
        rule.read_text()
        + "\n\ndef _borrowed():\n    from lklab.pipelines.unique_visitors.state import VisitorState  # noqa: F401\n"
    )
    done = lint(tmp_path)
    assert done.returncode == 1
    assert "Contracts: 1 kept, 1 broken." in done.stdout
    assert "lklab.pipelines.order_payments.rule -> lklab.pipelines.unique_visitors.state" in done.stdout


LAYER = {"dags": 0, "spark_jobs": 0, "lklab": 1, "reconciliation": 2, "shared": 3}


def test_every_tables_schema_string_points_down_the_layers_or_into_its_own_pipeline():
    """A table names the module of its rows' schema as a string (``shared.catalog.Table.rows``,
    imported when the schema is asked for), an import the contract above cannot see: it keeps
    the same rule. A table declared in a layer names a module of that layer or one below; a
    pipeline's table names no other pipeline's module."""
    import importlib
    import pkgutil

    from shared.catalog import Table

    modules = ["shared.catalog", "reconciliation.tables"]
    modules += [f"lklab.pipelines.{m.name}.tables" for m in pkgutil.iter_modules([str(REPO / "lklab" / "pipelines")])]
    checked, wrong = 0, []
    for name in modules:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError:
            continue
        for table in (value for value in vars(module).values() if type(value) is Table):
            target = table.rows.split(":")[0]
            checked += 1
            if LAYER[target.split(".")[0]] < LAYER[name.split(".")[0]]:
                wrong.append(f"{name}: {table.name} -> {target}")
            own = name.rsplit(".", 1)[0]
            if target.startswith("lklab.pipelines.") and not target.startswith(own + "."):
                wrong.append(f"{name}: {table.name} -> {target}")
    assert checked > 40 and wrong == []

"""The project declares what it imports: ``pyproject.toml`` names every third-party distribution
the code imports (runtime ones in ``dependencies``, test-only and benchmark-only ones in the
``test`` and ``bench`` groups), and ``requirements.txt`` pins each within its bounds.

``deptry`` reads the imports of ``dags/``, ``lklab/``, ``shared/``, ``reconciliation/`` and
``spark_jobs/`` (the ``[tool.deptry]`` settings) and maps each to the distribution installed for
it: an undeclared one fails (DEP001, or DEP003 when it only arrives through another package), as
does a runtime dependency nothing imports (DEP002) or a test-only one the code imports (DEP004).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

REPO = Path(__file__).resolve().parents[2]


def deptry(*args: str) -> subprocess.CompletedProcess:
    if subprocess.run([sys.executable, "-c", "import deptry"], capture_output=True).returncode != 0:
        pytest.fail("deptry is not installed: `make install` installs requirements.txt")
    return subprocess.run(
        [sys.executable, "-m", "deptry", ".", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_COLOR": "1"},
        timeout=300,
    )


def test_the_code_imports_only_declared_distributions_and_uses_every_runtime_one():
    done = deptry()
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_tests_import_only_declared_distributions():
    # The tests too (deptry leaves tests/ out by default); in them, test-only distributions are
    # expected and runtime ones may go unused.
    done = deptry("--exclude", r"benchmarks|docker|\.venv|\.git", "--ignore", "DEP002,DEP004")
    assert done.returncode == 0, done.stdout + done.stderr


def pins(name: str) -> dict[str, Version]:
    lines = (REPO / name).read_text().splitlines()
    pairs = (line.split("==") for line in lines if line.strip() and not line.startswith("#"))
    return {canonicalize_name(dist): Version(version) for dist, version in pairs}


def test_requirements_pin_every_declared_distribution_within_its_bounds():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    declared = [Requirement(r) for r in project["dependencies"]]
    declared += [Requirement(r) for group in project["optional-dependencies"].values() for r in group]
    requirements, constraints = pins("requirements.txt"), pins("constraints.txt")
    assert {canonicalize_name(r.name) for r in declared} == set(requirements)
    for requirement in declared:
        pinned = requirements[canonicalize_name(requirement.name)]
        assert pinned in requirement.specifier, (
            f"requirements.txt pins {requirement.name}=={pinned}, outside {requirement}"
        )
        assert constraints.get(canonicalize_name(requirement.name)) == pinned, (
            f"constraints.txt disagrees on {requirement.name}"
        )

"""The code keeps one style: ruff's lint rules and its formatter, configured in ``pyproject.toml``
(one line length for every file). A reformatted or lint-failing file fails here, naming it."""

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RUFF = str(Path(sys.executable).parent / "ruff")


def ruff(*argv: str, cwd: Path = REPO) -> subprocess.CompletedProcess:
    return subprocess.run([RUFF, *argv], cwd=cwd, capture_output=True, text=True, timeout=120)


def test_lint_passes():
    done = ruff("check", "--no-cache", ".")
    assert done.returncode == 0, done.stdout[-3000:]


def test_every_file_is_formatted():
    done = ruff("format", "--check", "--no-cache", ".")
    assert done.returncode == 0, done.stdout[-3000:]


def test_a_misformatted_file_is_caught(tmp_path):
    (tmp_path / "pyproject.toml").write_text((REPO / "pyproject.toml").read_text())
    (tmp_path / "bad.py").write_text("x = {  'a':1 }\n")
    done = ruff("format", "--check", "--no-cache", ".", cwd=tmp_path)
    assert done.returncode == 1 and "bad.py" in done.stdout

"""What a new user meets in the first hour: ``--version``, ``python -m lklab``, the usage of the
command they typed, a lake path that is wrong, help that lists the flags that apply, shell
completion and an example configuration file."""

import subprocess
import sys
from importlib.metadata import version

import pytest

from lklab.cli import main


def test_version_is_the_installed_distributions(capsys):
    assert main(["--version"]) == 0
    assert capsys.readouterr().out == f"lklab {version('lambda-kappa-lab')}\n"


def test_version_falls_back_to_the_package_without_a_distribution(monkeypatch):
    from importlib.metadata import PackageNotFoundError

    import lklab
    from lklab.cli import parser

    def missing(name):
        raise PackageNotFoundError(name)

    monkeypatch.setattr(parser, "distribution_version", missing)
    assert parser.lab_version() == lklab.__version__


def test_python_dash_m_lklab_is_the_lklab_command():
    result = subprocess.run([sys.executable, "-m", "lklab", "--version"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"lklab {version('lambda-kappa-lab')}\n"


@pytest.mark.parametrize(
    "command, args", [("batch", []), ("health", []), ("init", ["--pipeline", "meters", "--sample", "s.jsonl"])]
)
def test_an_unknown_flag_prints_the_usage_of_the_command_it_was_given_to(command, args, capsys):
    assert main([command, *args, "--no-such-flag"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"usage: lklab {command} ")
    assert err.endswith(f"lklab {command}: error: unrecognized arguments: --no-such-flag\n")

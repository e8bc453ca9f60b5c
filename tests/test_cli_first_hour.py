"""What a new user meets in the first hour: ``--version``, ``python -m lklab``, the usage of the
command they typed, a lake path that is wrong, help that lists the flags that apply, shell
completion and an example configuration file."""

import re
import shutil
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest

from lklab.cli import main


def test_version_is_the_installed_distributions(capsys):
    assert main(["--version"]) == 0
    assert capsys.readouterr().out == f"lklab {version('lambda-kappa-lab')}\n"


def test_version_falls_back_to_the_package_without_a_distribution(tmp_path):
    """A checkout run without installing it: the venv's packages on the path but not the lab's
    distribution (its metadata and its editable finder left out), the checkout first."""
    import site

    import lklab

    packages = Path(next(p for p in site.getsitepackages() if p.endswith("site-packages")))
    visible = tmp_path / "site-packages"
    visible.mkdir()
    for entry in packages.iterdir():
        if "lambda_kappa_lab" not in entry.name:
            (visible / entry.name).symlink_to(entry)
    checkout = Path(lklab.__file__).resolve().parents[1]
    sources = tmp_path / "checkout"  # the packages alone: no metadata a build left beside them
    sources.mkdir()
    for package in ("lklab", "shared", "reconciliation"):
        (sources / package).symlink_to(checkout / package)
    script = (
        "from importlib.metadata import PackageNotFoundError, version\n"
        "try:\n    version('lambda-kappa-lab'); print('installed')\n"
        "except PackageNotFoundError:\n    from lklab.cli.parser import lab_version; print(lab_version())"
    )
    result = subprocess.run(
        [sys.executable, "-S", "-c", script],
        env={"PYTHONPATH": f"{sources}:{visible}", "PATH": "/usr/bin:/bin"},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"{lklab.__version__}\n"


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


READS_A_LAKE = [
    ["health"],
    ["tables"],
    ["batch"],
    ["speed", "--available-now"],
    ["replay", "--name", "r"],
    ["reconcile"],
    ["compare"],
    ["maintain"],
]
WRITES_A_LAKE = [["generate"], ["ingest", "events.jsonl"], ["demo"]]


@pytest.mark.parametrize("args", READS_A_LAKE + WRITES_A_LAKE, ids=lambda args: args[0])
def test_a_lake_that_is_a_file_is_a_usage_error_naming_it(args, tmp_path, lklab_here):
    lake = tmp_path / "events.jsonl"
    lake.write_text("{}\n")
    result = lklab_here(*args, "--lake", str(lake), cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith(f"lklab {args[0]}: lake {lake}: not a directory; a lake is the folder holding")
    assert result.stderr.count("\n") == 1


@pytest.mark.parametrize("args", READS_A_LAKE, ids=lambda args: args[0])
def test_a_command_that_reads_a_lake_refuses_one_that_does_not_exist(args, tmp_path, lklab_here):
    result = lklab_here(*args, "--lake", str(tmp_path / "typo"), cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith(f"lklab {args[0]}: lake {tmp_path / 'typo'}: no such directory; a lake is")
    assert not (tmp_path / "typo").exists()


def test_the_lake_named_by_the_environment_is_checked_as_the_flags(tmp_path, lklab_here):
    result = lklab_here("health", cwd=tmp_path, env={"LKLAB_LAKE": str(tmp_path / "typo")})
    assert result.returncode == 2 and f"lake {tmp_path / 'typo'}: no such directory" in result.stderr


def test_a_command_that_writes_a_lake_creates_one_that_does_not_exist(tmp_path, lklab_here):
    from lklab.cli.options import config_from
    from lklab.cli.parser import build_parser

    lake = tmp_path / "new"
    result = lklab_here("generate", "--events", "10", "--lake", str(lake), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert (lake / "log").is_dir()
    parse = build_parser().parse_args
    for args in (
        ["compare", "--scenario", "billing"],
        ["reconcile", "--truth-table", "t", "--stream-table", "s", "--keys", "k", "--measures", "m"],
    ):
        assert config_from(parse([*args, "--lake", str(tmp_path / "other")])).lake == tmp_path / "other"


def printed_help(capsys, *args) -> str:
    """What ``lklab ARGS`` prints, up to the example (which may use any flag)."""
    capsys.readouterr()
    assert main(list(args)) == 0
    return capsys.readouterr().out.split("\nexample:\n")[0]


def test_help_lists_each_pipelines_own_flags_under_its_name_and_leaves_out_flags_no_pipeline_takes(capsys):
    speed = printed_help(capsys, "speed", "--help")
    assert "unique_visitors only:\n  --state-ttl" in speed and "order_payments only:\n  --join-bound" in speed
    assert "--allowed-lateness" in speed and "'lklab speed --pipeline NAME --help' lists only the flags" in speed
    batch = printed_help(capsys, "batch", "--help")
    assert "--allowed-lateness" not in batch  # the batch truth does not depend on it, whatever the pipeline
    assert "--watermark-delay" in batch


@pytest.mark.parametrize("order", ["pipeline first", "help first"])
def test_help_of_one_pipeline_lists_only_the_flags_it_takes(order, capsys):
    selected = ["--pipeline", "unique_visitors"]
    speed = printed_help(
        capsys, "speed", *(selected + ["--help"] if order == "pipeline first" else ["--help"] + selected)
    )
    assert "unique_visitors only:\n  --state-ttl" in speed
    assert "--join-bound" not in speed and "order_payments only" not in speed
    batch = printed_help(capsys, "batch", "--pipeline=running_max", "-h")
    for refused in ("--window-size", "--watermark-delay", "--date", "--state-ttl", "--join-bound"):
        assert refused not in batch
    assert "--refresh" in batch and "--table-engine" in batch


def test_help_of_a_declared_pipeline_leaves_out_what_its_declaration_fixes(capsys):
    config = str(Path(__file__).resolve().parents[1] / "examples" / "meters" / "meters.toml")
    batch = printed_help(capsys, "batch", "--pipeline", "meter_kwh", "--config", config, "--help")
    assert "--window-size" not in batch and "--watermark-delay" not in batch and "--state-ttl" not in batch
    assert "--spark-master" in batch


def completion_script(shell: str, tmp_path, capsys) -> Path:
    capsys.readouterr()
    assert main(["completion", shell]) == 0
    script = tmp_path / f"lklab.{shell}"
    script.write_text(capsys.readouterr().out)
    return script


def test_bash_completion_completes_commands_flags_and_pipelines(tmp_path, capsys):
    script = completion_script("bash", tmp_path, capsys)
    lines = [["lklab", "sp"], ["lklab", "batch", "--pip"], ["lklab", "batch", "--pipeline", ""]]
    lines += [["lklab", "batch", "--all"], ["lklab", "completion", ""], ["lklab", "speed", "--lake", ""]]
    calls = "".join(
        f"COMP_WORDS=({' '.join(repr(word) for word in line)}); COMP_CWORD={len(line) - 1}; COMPREPLY=(); _lklab; "
        'echo "${COMPREPLY[*]}"\n'
        for line in lines
    )
    (tmp_path / "lake").mkdir()
    done = subprocess.run(
        ["bash", "-c", f"source {script}\n{calls}"], capture_output=True, text=True, cwd=tmp_path, timeout=60
    )
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert done.stdout.splitlines() == [
        "speed",
        "--pipeline",
        "billing_windows unique_visitors order_payments running_max",
        "",  # --allowed-lateness means nothing to a batch: not offered
        "bash zsh",
        "lake",
    ]


@pytest.mark.skipif(shutil.which("zsh") is None, reason="no zsh here")
def test_zsh_completion_is_a_zsh_script_listing_every_command(tmp_path, capsys):
    script = completion_script("zsh", tmp_path, capsys)
    assert subprocess.run(["zsh", "-n", str(script)], capture_output=True, text=True).returncode == 0
    text = script.read_text()
    assert text.startswith("#compdef lklab\n")
    assert "'health:Is a pipeline'\\''s live stream keeping up'" in text
    assert "--pipeline'[which pipeline]:pipeline:(billing_windows unique_visitors order_payments running_max)'" in text


def test_completion_for_another_shell_is_a_usage_error(capsys):
    assert main(["completion", "fish"]) == 2
    assert "argument shell: invalid choice: 'fish' (choose from 'bash', 'zsh')" in capsys.readouterr().err


SETTING_LINE = re.compile(r"^# ([a-z-]+) = (.+)$")


def test_the_example_configuration_names_every_setting_with_its_default_and_meaning(tmp_path):
    """examples/lklab.toml, its settings uncommented, is the defaults (a setting unset by default
    stays commented: its line shows a value to give it)."""
    from shared.config import SETTINGS, LabConfig, load_config

    lines = (Path(__file__).resolve().parents[1] / "examples" / "lklab.toml").read_text().splitlines()
    found = {}
    for number, line in enumerate(lines):
        match = SETTING_LINE.match(line)
        if match:
            assert match.group(1) not in found, f"{match.group(1)} twice"
            assert lines[number - 1].startswith("# ") and not SETTING_LINE.match(lines[number - 1]), line
            found[match.group(1)] = match.group(2)
    assert sorted(found) == sorted(SETTINGS)
    unset = [key for key, value in LabConfig().describe().items() if value == ""]
    uncommented = tmp_path / "lklab.toml"
    uncommented.write_text("".join(f"{key} = {value}\n" for key, value in found.items() if key not in unset))
    assert load_config(uncommented, environ={}) == LabConfig()

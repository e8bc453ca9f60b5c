"""One registry of pipelines (``lklab.pipelines``): every command finds a pipeline there, by name,
and nothing outside a pipeline's own package asks which pipeline it is serving."""

import re
import subprocess
from pathlib import Path

import pytest

from lklab.cli import main
from lklab.cli.parser import build_parser
from lklab.cli.pipelines import pipeline_handler
from lklab.pipelines import DEFAULT, REGISTRY, UnknownPipeline, find
from lklab.pipelines.contract import PER_PIPELINE

REPO = Path(__file__).resolve().parents[1]


def test_the_registry_holds_each_pipeline_under_its_own_name():
    assert list(REGISTRY) == ["billing_windows", "unique_visitors", "order_payments", "running_max"]
    assert DEFAULT == "billing_windows"
    assert all(find(name).name == name for name in REGISTRY)
    with pytest.raises(
        UnknownPipeline,
        match="'meters' is not valid; valid: billing_windows, unique_visitors, order_payments, running_max",
    ):
        find("meters")


def test_a_pipeline_declares_jobs_only_for_commands_that_exist():
    commands = set(build_parser()._subparsers._group_actions[0].choices)
    for pipeline in REGISTRY.values():
        assert set(pipeline.jobs().commands()) <= set(PER_PIPELINE) & commands, pipeline.name
    assert set(REGISTRY["billing_windows"].jobs().commands()) == set(PER_PIPELINE) - {"compare"}
    assert set(REGISTRY["unique_visitors"].jobs().commands()) == set(PER_PIPELINE) - {"compare"}
    assert set(REGISTRY["running_max"].jobs().commands()) == set(PER_PIPELINE) - {"compare"}


def test_a_command_a_pipeline_has_no_handler_for_is_refused(capsys):
    assert main(["compare", "--pipeline", "running_max", "--lake", "/nonexistent-lake"]) == 2
    assert capsys.readouterr().err == (
        "lklab compare: running_max has no 'compare' command; it has: batch, generate, reconcile, replay, speed\n"
    )


def test_an_unknown_pipeline_is_a_usage_error_naming_the_valid_ones(capsys):
    assert main(["batch", "--pipeline", "meters", "--lake", "/nonexistent-lake"]) == 2
    err = capsys.readouterr().err
    assert err == (
        "lklab batch: pipeline: 'meters' is not valid; valid: billing_windows, unique_visitors, order_payments, "
        "running_max\n"
    )


def test_a_pipeline_setting_is_listed_under_its_pipeline_and_refused_by_the_others(capsys):
    help_text = build_parser()._subparsers._group_actions[0].choices["speed"].format_help()
    assert "unique_visitors only:\n  --state-ttl" in help_text
    assert "order_payments only:\n  --join-bound" in help_text
    args = build_parser().parse_args(["speed", "--pipeline", "billing_windows", "--join-bound", "5m"])
    with pytest.raises(
        Exception,
        match="--join-bound does not apply to 'speed' on the billing_windows pipeline: join-bound is order_payments'",
    ):
        pipeline_handler(args)


def test_no_code_outside_a_pipeline_package_branches_on_the_pipeline():
    listed = subprocess.run(["git", "ls-files", "*.py"], cwd=REPO, capture_output=True, text=True, check=True)
    branch = re.compile(r"pipeline(\.name)? *(==|!=|in) *[(\"'\[]")
    found = [
        f"{path}:{number}"
        for path in listed.stdout.split()
        if not path.startswith(("lklab/pipelines/", "tests/", "benchmarks/"))
        for number, line in enumerate((REPO / path).read_text().splitlines(), 1)
        if branch.search(line)
    ]
    assert found == []


def test_every_registered_pipeline_is_kept_independent_by_the_import_contract():
    """The registered pipelines, and the package of the pipelines declared in a file."""
    import configparser

    contracts = configparser.ConfigParser()
    contracts.read(REPO / ".importlinter")
    listed = contracts["importlinter:contract:pipelines"]["modules"].split()
    packages = [*REGISTRY, "declared"]
    assert sorted(listed) == sorted(f"lklab.pipelines.{name}" for name in packages)


def test_every_pipeline_the_default_included_runs_its_commands_through_the_same_handlers(tmp_path):
    """One handler per command (``lklab.cli.pipeline_jobs``, ``lklab.cli.compare``) for every
    pipeline; no module per command holds a pipeline's work."""
    argv = {"replay": ["--name", "r"], "reconcile": [], "compare": []}
    for pipeline in REGISTRY.values():
        commands = [*pipeline.jobs().commands(), *(["compare"] if pipeline.compare else [])]
        for command in commands:
            args = build_parser().parse_args(
                [command, *argv.get(command, []), "--pipeline", pipeline.name, "--lake", str(tmp_path)]
            )
            handler = pipeline_handler(args)
            function = getattr(handler, "func", handler)
            expected = "lklab.cli.compare" if command == "compare" else "lklab.cli.pipeline_jobs"
            assert function.__module__ == expected, (pipeline.name, command)
    assert not any(
        (REPO / "lklab" / "cli" / f"{command}.py").exists() for command in PER_PIPELINE if command != "compare"
    )


def test_a_job_takes_only_the_options_the_contract_names():
    from lklab.pipelines.contract import OPTIONS, Jobs

    assert set(REGISTRY["billing_windows"].jobs().takes) <= set(OPTIONS)
    with pytest.raises(ValueError, match="Jobs.takes: stop_after not among days"):
        Jobs(takes=("days", "stop_after"))


def test_jobs_are_taken_by_the_names_of_their_functions():
    from lklab.pipelines.contract import Jobs

    def speed(spark, config, **options):
        return None

    def stream(spark, config):
        return None

    jobs = Jobs.of(speed, describe=lambda config: "settings")
    assert (jobs.speed, jobs.commands(), jobs.describe(None)) == (speed, ("speed",), "settings")
    with pytest.raises(ValueError, match="Jobs.of: stream not among generate, speed, batch, replay, reconcile"):
        Jobs.of(stream)

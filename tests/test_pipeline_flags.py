"""Flags a pipeline's command has no use for are refused (exit 2, naming the flag, the command and
the pipeline), never silently ignored; the flags it does use pass. In process (``lklab.cli.main``):
every refusal comes before any Spark or lake work."""

from __future__ import annotations

import pytest

from lklab.cli import main
from lklab.cli.parser import build_parser
from lklab.cli.pipelines import pipeline_handler


@pytest.fixture
def lab(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no lklab.toml of the checkout's
    for name in ("LKLAB_PIPELINE", "LKLAB_CONFIG"):
        monkeypatch.delenv(name, raising=False)
    return ["--lake", str(tmp_path / "lake")]


@pytest.mark.parametrize(
    "args, flag, command, pipeline",
    [
        (["batch", "--pipeline", "order_payments", "--date", "2026-01-05"], "--date", "batch", "order_payments"),
        (
            ["batch", "--pipeline", "unique_visitors", "--from", "2026-01-05", "--to", "2026-01-06"],
            "--from",
            "batch",
            "unique_visitors",
        ),
        (
            ["batch", "--pipeline", "order_payments", "--allowed-lateness", "5m"],
            "--allowed-lateness",
            "batch",
            "order_payments",
        ),
        (["batch", "--allowed-lateness", "5m"], "--allowed-lateness", "batch", "billing_windows"),
        (["generate", "--allowed-lateness", "5m"], "--allowed-lateness", "generate", "billing_windows"),
        (
            ["generate", "--pipeline", "order_payments", "--scenario", "outage"],
            "--scenario",
            "generate",
            "order_payments",
        ),
        (["generate", "--pipeline", "order_payments", "--accounts", "5"], "--accounts", "generate", "order_payments"),
        (
            ["replay", "--pipeline", "unique_visitors", "--name", "r", "--history"],
            "--history",
            "replay",
            "unique_visitors",
        ),
        (
            ["replay", "--pipeline", "order_payments", "--name", "r", "--history"],
            "--history",
            "replay",
            "order_payments",
        ),
        (["reconcile", "--pipeline", "order_payments", "--json"], "--json", "reconcile", "order_payments"),
        (["reconcile", "--pipeline", "unique_visitors", "--abs-tol", "1"], "--abs-tol", "reconcile", "unique_visitors"),
        (
            ["reconcile", "--pipeline", "unique_visitors", "--allowed-lateness", "5m"],
            "--allowed-lateness",
            "reconcile",
            "unique_visitors",
        ),
        (["compare", "--pipeline", "order_payments", "--events", "50"], "--events", "compare", "order_payments"),
        (["demo", "--pipeline", "unique_visitors"], "--pipeline", "demo", "unique_visitors"),
        (["maintain", "--pipeline", "order_payments"], "--pipeline", "maintain", "order_payments"),
        (["speed", "--pipeline", "order_payments", "--window-size", "2m"], "--window-size", "speed", "order_payments"),
        (["speed", "--pipeline", "unique_visitors", "--join-bound", "5m"], "--join-bound", "speed", "unique_visitors"),
        (["speed", "--state-ttl", "1h"], "--state-ttl", "speed", "billing_windows"),
    ],
)
def test_a_flag_the_command_does_not_use_is_refused_with_exit_2(lab, capsys, args, flag, command, pipeline):
    assert main([*args, *lab]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"lklab {command}: {flag} does not apply to '{command}' on the {pipeline} pipeline: ")
    assert err.endswith("; drop the flag\n") and err.count("\n") == 1


@pytest.mark.parametrize(
    "args, handler",
    [
        (
            ["speed", "--pipeline", "order_payments", "--allowed-lateness", "30m", "--join-bound", "10m"],
            "lklab.cli.pipeline_jobs.order_payments_speed",
        ),
        (
            ["replay", "--pipeline", "order_payments", "--name", "r", "--allowed-lateness", "30m"],
            "lklab.cli.pipeline_jobs.order_payments_replay",
        ),
        (
            ["compare", "--pipeline", "order_payments", "--allowed-lateness", "0,30m"],
            "lklab.cli.compare.compare_pipeline",
        ),
        (
            ["batch", "--pipeline", "unique_visitors", "--window-size", "2m", "--refresh"],
            "lklab.cli.pipeline_jobs.unique_visitors_batch",
        ),
        (
            ["reconcile", "--pipeline", "order_payments", "--against", "kappa:r"],
            "lklab.cli.pipeline_jobs.order_payments_reconcile",
        ),
        (
            ["speed", "--pipeline", "unique_visitors", "--allowed-lateness", "5s", "--state-ttl", "1h"],
            "lklab.cli.pipeline_jobs.unique_visitors_speed",
        ),
        (["ingest", "--pipeline", "order_payments", "events.jsonl"], None),  # one log for every pipeline
        (["health"], None),
        (["health", "--pipeline", "order_payments"], None),  # its own stream's health
        (["batch", "--date", "2026-01-05"], "lklab.cli.pipeline_jobs.billing_windows_batch"),
        (["batch", "--refresh", "--whole-log"], "lklab.cli.pipeline_jobs.billing_windows_batch"),
        (
            ["reconcile", "--against", "kappa:r", "--abs-tol", "1", "--json"],
            "lklab.cli.pipeline_jobs.billing_windows_reconcile",
        ),
        (["replay", "--name", "r", "--history"], "lklab.cli.pipeline_jobs.billing_windows_replay"),
        (["compare", "--scenario", "billing"], "lklab.cli.compare.compare_pipeline"),
        (["demo"], None),  # the default pipeline's comparison, over a scenario it generates
    ],
)
def test_the_flags_a_command_uses_pass(lab, args, handler):
    found = pipeline_handler(build_parser().parse_args([*args, *lab]))
    if handler is None:
        assert found is None  # not a pipeline's command: its own handler
    else:
        function = getattr(found, "func", found)
        assert f"{function.__module__}.{function.__name__}" == handler

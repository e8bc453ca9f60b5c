"""``lklab compare --scenario`` (and ``demo``) generate a new lake over the old one only when
nothing would be lost: not a log the lab did not generate, and not a lake that an always-on
stream of any pipeline reads (its checkpoint is under ``<lake>/checkpoints/<app id>``)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from lklab.pipelines import REGISTRY
from lklab.pipelines.billing_windows.generator import GeneratorParams, generate, unreplaceable
from lklab.pipelines.unique_visitors.generator import PageViewParams, generate_page_views

# An always-on stream runs without a prefix: its checkpoint is checkpoints/<its app id>.
ALWAYS_ON = [pipeline.stream().app_id for pipeline in REGISTRY.values() if pipeline.stream() is not None]


@pytest.fixture
def lklab_here(capsys):
    """``lklab ARGS`` as ``lklab.cli.main`` called in this process, with no ``LKLAB_`` setting in
    the environment (put back afterwards), instead of an ``lklab`` process: what the refusal
    checks is its exit code and its message, which a process prints the same."""
    from lklab.cli import main
    from tests.conftest import cli_in_this_process

    def call(*args) -> subprocess.CompletedProcess:
        capsys.readouterr()
        with cli_in_this_process():
            for name in [name for name in os.environ if name.startswith("LKLAB_")]:
                del os.environ[name]
            code = main(list(args))
        out, err = capsys.readouterr()
        return subprocess.CompletedProcess(["lklab", *args], code, out, err)

    return call


@pytest.fixture
def generated(tmp_path) -> Path:
    generate(GeneratorParams(events=50), tmp_path / "lake")
    return tmp_path / "lake"


def test_the_three_always_on_streams_are_the_pipelines_speed_layers():
    assert ALWAYS_ON == ["speed", "visitors-speed", "payments", "max-speed"]


def test_a_generated_lake_no_stream_reads_is_replaceable_also_after_a_comparison(generated):
    assert unreplaceable(generated) is None
    (generated / "checkpoints" / "kappa" / "compare-1-w30s-l0" / "speed" / "offsets").mkdir(parents=True)
    assert unreplaceable(generated) is None  # a comparison's own live run


@pytest.mark.parametrize("app_id", ALWAYS_ON)
def test_a_lake_an_always_on_stream_reads_is_not_replaceable(generated, app_id):
    (generated / "checkpoints" / app_id / "offsets").mkdir(parents=True)
    assert unreplaceable(generated) == f"is read by a speed layer (it has the checkpoint checkpoints/{app_id})"


def test_every_stream_reading_the_lake_is_named_even_over_a_log_the_lab_did_not_generate(tmp_path):
    for app_id in ("visitors-speed", "payments"):
        (tmp_path / "checkpoints" / app_id).mkdir(parents=True)
    assert (
        unreplaceable(tmp_path)
        == "is read by a speed layer (it has the checkpoints checkpoints/payments, checkpoints/visitors-speed)"
    )


def test_compare_scenario_refuses_a_billing_lake_turned_page_views_that_the_visitors_layer_reads(tmp_path, lklab_here):
    """``generate --pipeline unique_visitors --overwrite`` replaces the log and leaves the billing
    generator's manifest: the checkpoint alone tells that the unique_visitors layer reads it."""
    lake = str(tmp_path / "lake")
    generate(GeneratorParams(events=50), lake)
    generate_page_views(PageViewParams(views=50), lake, overwrite=True)
    (tmp_path / "lake" / "checkpoints" / "visitors-speed" / "offsets").mkdir(parents=True)
    log = {path.name: path.read_bytes() for path in (tmp_path / "lake" / "log").iterdir()}
    refused = lklab_here("compare", "--scenario", "billing", "--lake", lake)
    assert refused.returncode == 2
    assert refused.stderr == (
        f"lklab compare: {lake} is read by a speed layer (it has the checkpoint checkpoints/visitors-speed); "
        "pass --overwrite to replace it, or choose another --lake\n"
    )
    assert {path.name: path.read_bytes() for path in (tmp_path / "lake" / "log").iterdir()} == log
    assert (tmp_path / "lake" / "checkpoints" / "visitors-speed" / "offsets").is_dir()

"""The batch recompute over generated scenarios equals the generator's ground truth exactly."""

import dataclasses
from decimal import Decimal

import pytest

from lklab.pipelines.billing_windows.batch import run_batch
from lklab.pipelines.billing_windows.generator import GeneratorParams, generate
from lklab.pipelines.billing_windows.summary import same_rows
from lklab.pipelines.billing_windows.truth import truth_windows
from shared.config import LabConfig
from shared.tables import Tables

CASES = [
    ("billing", dict(window_kind="tumbling", window_size=60_000_000)),
    ("clickstream", dict(window_kind="sliding", window_size=300_000_000, window_slide=60_000_000)),
    ("outage", dict(window_kind="session", session_gap=120_000_000)),
]


@pytest.fixture(scope="module")
def batched(spark, tmp_path_factory):
    """``batched(scenario)``: its generated lake after one batch recompute (``CASES``' windows),
    ``(lake, config, run, generated)``; each scenario made once in the module."""
    made = {}

    def make(scenario: str):
        if scenario not in made:
            lake = tmp_path_factory.mktemp(scenario)
            params = GeneratorParams(
                scenario=scenario, events=20_000, accounts=12, duplicate_rate=0.02, malformed_rate=0.005
            )
            generated = generate(params, lake)
            config = LabConfig(lake=lake, table_engine="deltalake", **dict(CASES)[scenario])
            made[scenario] = (lake, config, run_batch(spark, config), generated)
        return made[scenario]

    return make


@pytest.mark.parametrize("scenario, windows", CASES, ids=[c[0] for c in CASES])
def test_batch_equals_ground_truth_and_every_line_is_accounted_for(spark, batched, scenario, windows):
    lake, config, run, generated = batched(scenario)
    manifest = generated.manifest

    assert (run.lines, run.events, run.duplicates, run.dead_letters) == (
        manifest["lines"],
        manifest["events"],
        manifest["duplicates"],
        sum(manifest["dead_letters"].values()),
    )
    assert run.conserved
    tables = Tables(spark, lake, "deltalake")
    dead = tables.read_arrow("batch_dead_letter").to_pylist()
    by_reason = {}
    for row in dead:
        by_reason[row["reject_reason"]] = by_reason.get(row["reject_reason"], 0) + 1
    assert by_reason == manifest["dead_letters"]
    assert same_rows(tables.read_arrow("batch_truth"), truth_windows(generated.events, config.window))

    if windows["window_kind"] != "sliding":  # sliding windows count each event in several windows
        money = {}
        for row in tables.read_arrow("batch_truth").to_pylist():
            money[row["currency"]] = money.get(row["currency"], Decimal(0)) + row["amount_total"]
        assert money == {c: Decimal(v) for c, v in manifest["money_by_currency"].items()}


def test_rerun_leaves_identical_tables(spark, batched, tmp_path):
    """A second batch recompute over the same log, on a copy of a lake after its first."""
    import shutil

    source, config, _, _ = batched("billing")
    lake = tmp_path / "lake"
    shutil.copytree(source, lake)
    config = dataclasses.replace(config, lake=lake)
    tables = Tables(spark, lake, "deltalake")
    names = ("batch_truth", "batch_dead_letter", "batch_duplicates")

    def contents():
        return {
            name: sorted(tables.read_arrow(name).to_pylist(), key=lambda row: [str(v) for v in row.values()])
            for name in names
        }

    first = contents()
    run_batch(spark, config)
    assert contents() == first
    assert all(first[name] for name in names)

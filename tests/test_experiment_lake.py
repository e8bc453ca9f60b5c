"""The experiment DAG claims its lake before overwriting it (``lklab.experiment_lake``)."""

from pathlib import Path

import pytest

from lklab.experiment_lake import EXPERIMENT_MARKER, NotAnExperimentLake, claim, default_lake
from lklab.pipelines.billing_windows.generator import GeneratorParams, generate


def test_an_absent_or_empty_lake_is_claimed_and_stays_the_experiments(tmp_path):
    lake = tmp_path / "lake-experiment"
    assert claim(lake, tmp_path / "lake") == lake
    assert (lake / EXPERIMENT_MARKER).is_file()
    generate(GeneratorParams(events=20), lake, overwrite=True)
    assert claim(lake, tmp_path / "lake") == lake  # its own data: claimed again


def test_the_live_lake_is_refused(tmp_path):
    with pytest.raises(NotAnExperimentLake, match="is the configured live lake"):
        claim(tmp_path / "lake" / ".." / "lake", tmp_path / "lake")


def test_a_lake_with_data_the_experiment_did_not_make_is_refused_and_left_alone(tmp_path):
    lake = tmp_path / "other"
    generate(GeneratorParams(events=20), lake)
    (lake / "checkpoints" / "speed").mkdir(parents=True)
    (lake / "checkpoints" / "speed" / "offsets").write_text("0")
    with pytest.raises(
        NotAnExperimentLake, match=r"holds log, checkpoints, generator that the experiment did not make"
    ):
        claim(lake, tmp_path / "lake")
    assert not (lake / EXPERIMENT_MARKER).exists()
    assert (lake / "checkpoints" / "speed" / "offsets").read_text() == "0"


def test_the_default_lake_is_the_environments_else_the_live_one_with_a_suffix(monkeypatch):
    monkeypatch.delenv("LKLAB_EXPERIMENT_LAKE", raising=False)
    assert default_lake(Path("/data/lake")) == "/data/lake-experiment"
    monkeypatch.setenv("LKLAB_EXPERIMENT_LAKE", "/data/trial")
    assert default_lake(Path("/data/lake")) == "/data/trial"

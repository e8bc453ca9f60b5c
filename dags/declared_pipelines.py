"""``<name>_nightly`` and ``<name>_replay`` of every pipeline the configuration file in use
declares (``[pipelines.NAME]`` with a ``kind``, in ``$LKLAB_CONFIG`` or ``./lklab.toml``): the
truth from the whole log then the speed layer reconciled with it, nightly at 04:00 UTC, and a
manual Kappa replay, each task naming its pipeline (``--pipeline NAME``). Only the section names
are read here; the declaration is read by each task when it runs. ``lklab.pipeline_dags`` makes
them and writes their docs."""

from __future__ import annotations

from airflow.sdk import DAG

from lklab.pipeline_dags import declared_dags

DECLARED: dict[str, DAG] = declared_dags()
globals().update(DECLARED)

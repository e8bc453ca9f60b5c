"""The registry of pipelines: every pipeline the lab runs, found by name.

``REGISTRY[name]`` is the ``Pipeline`` (``lklab.pipelines.contract``) its package declares as
``PIPELINE``; ``find(name)`` is the same with an error naming the valid ones. Adding a pipeline
is one package under ``lklab.pipelines`` and one line here. Naming a pipeline imports only its
declaration, none of its Spark or Arrow code.
"""

from __future__ import annotations

from lklab.pipelines import billing_windows, order_payments, running_max, unique_visitors
from lklab.pipelines.contract import Pipeline

__all__ = ["REGISTRY", "DEFAULT", "UnknownPipeline", "find", "names"]

REGISTRY: dict[str, Pipeline] = {
    package.PIPELINE.name: package.PIPELINE
    for package in (billing_windows, unique_visitors, order_payments, running_max)
}
DEFAULT = billing_windows.PIPELINE.name


class UnknownPipeline(ValueError):
    """A pipeline name the registry does not hold; the message lists the valid ones."""


def names() -> tuple[str, ...]:
    return tuple(REGISTRY)


def find(name: str) -> Pipeline:
    """The pipeline called ``name`` (``UnknownPipeline`` naming the valid ones otherwise)."""
    try:
        return REGISTRY[name]
    except KeyError:
        raise UnknownPipeline(f"pipeline: {name!r} is not valid; valid: {', '.join(REGISTRY)}") from None

"""Reconciliation as a Spark job: ``spark-submit spark_jobs/reconcile_job.py [--date D] [--against ...]``.

The work is ``reconciliation.reconcile``; this entry point only hands its arguments to
``lklab reconcile`` (no date: every day the truth holds). Exit 3 when the unexplained gap
exceeds ``--max-unexplained``.
"""

from __future__ import annotations

import sys

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    from lklab.cli import main as lklab

    return lklab(["reconcile", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())

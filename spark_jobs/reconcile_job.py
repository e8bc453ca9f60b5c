"""``spark-submit spark_jobs/reconcile_job.py [--date D] [--against ...]``: ``lklab reconcile`` as a Spark
application (no date: every day the truth holds); exit 3 when the unexplained gap exceeds
``--max-unexplained``."""

import sys

from lklab.cli import run

if __name__ == "__main__":
    run(["reconcile", *sys.argv[1:]])

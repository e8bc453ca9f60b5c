"""``spark-submit spark_jobs/reconcile_job.py [--date D] [--against ...]``: ``lklab reconcile`` as a Spark
application (no date: every day the truth holds); exit 3 when the unexplained gap exceeds
``--max-unexplained``."""

import sys

from lklab.cli import main

if __name__ == "__main__":
    sys.exit(main(["reconcile", *sys.argv[1:]]))

"""``spark-submit spark_jobs/batch_job.py [lklab batch flags, e.g. --date 2026-01-31]``: ``lklab batch`` as a Spark application."""

import sys

from lklab.cli import run

if __name__ == "__main__":
    run(["batch", *sys.argv[1:]])

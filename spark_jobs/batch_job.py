"""``spark-submit spark_jobs/batch_job.py [lklab batch flags, e.g. --date 2026-01-31]``: ``lklab batch`` as a Spark application."""

import sys

from lklab.cli import main

if __name__ == "__main__":
    sys.exit(main(["batch", *sys.argv[1:]]))

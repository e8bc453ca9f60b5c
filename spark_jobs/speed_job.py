"""``spark-submit spark_jobs/speed_job.py [lklab speed flags; always on, SIGTERM stops it cleanly]``: ``lklab speed`` as a Spark application."""

import sys

from lklab.cli import run

if __name__ == "__main__":
    run(["speed", *sys.argv[1:]])

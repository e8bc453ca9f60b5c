"""``spark-submit spark_jobs/replay_job.py [--name RUN and lklab replay flags]``: ``lklab replay`` as a Spark application."""

import sys

from lklab.cli import run

if __name__ == "__main__":
    run(["replay", *sys.argv[1:]])

"""``python -m lklab``: the ``lklab`` command."""

from lklab.cli import run

run()

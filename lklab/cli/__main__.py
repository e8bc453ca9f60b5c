"""``python -m lklab.cli``: the ``lklab`` command."""

from lklab.cli import run

run()

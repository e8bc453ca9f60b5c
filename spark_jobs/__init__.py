"""Leaf entry points for spark-submit: each hands its arguments to one ``lklab`` command."""

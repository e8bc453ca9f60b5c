"""Thin Spark entry points: source, sink and trigger wiring around ``shared`` transformations."""

"""The transformation core shared by streaming and batch: events, dedup, windows, aggregates."""

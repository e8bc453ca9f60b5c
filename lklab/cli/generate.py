"""``lklab generate``: write a scenario's log and its manifest."""

from __future__ import annotations

import argparse

from lklab.cli.console import UsageError, progress
from lklab.cli.options import config_from, generate_request
from shared.config import LabConfig


def generate_log(args: argparse.Namespace, config: LabConfig) -> dict:
    from lklab.pipelines.billing_windows.generator import GeneratorParams, generate

    request = generate_request(args)
    try:
        params = GeneratorParams(
            scenario=request.scenario,
            events=request.events,
            seed=request.seed,
            span=request.span,
            accounts=request.accounts,
            duplicate_rate=request.duplicate_rate,
            malformed_rate=request.malformed_rate,
            segment_interval=request.segment_interval,
        )
        generated = generate(params, config.lake, overwrite=request.overwrite, progress=progress)
    except (ValueError, FileExistsError) as err:
        raise UsageError(str(err)) from None
    manifest = generated.manifest
    progress(
        f"log written: {manifest['lines']:,} lines in {manifest['segments']:,} segments under "
        f"{config.lake / 'log'} ({manifest['generate_seconds']}s)"
    )
    return manifest


def cmd_generate(args: argparse.Namespace) -> int:
    config = config_from(args)
    manifest = generate_log(args, config)
    delays = manifest["delay_seconds"]
    print(
        f"{manifest['events']:,} events, {manifest['duplicates']:,} retries, "
        f"{sum(manifest['dead_letters'].values()):,} malformed lines -> {config.lake / 'log'}\n"
        f"arrival delay p50 {delays['p50']:.1f}s, p99 {delays['p99']:.0f}s, "
        f"p99.9 {delays['p99_9']:.0f}s, max {delays['max']:.0f}s"
    )
    return 0

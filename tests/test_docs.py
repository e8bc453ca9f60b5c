"""The documentation: the MkDocs site builds in strict mode (no broken link, no page missing from
the build), its CLI reference is generated from the parser and names every command, the README
stays a short front door whose links into ``docs/`` resolve, and the embedded Airflow steps shown
on the operations page are the README's (which ``tests/test_airflow_run.py`` runs)."""

from __future__ import annotations

import argparse
import html
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from lklab.cli.parser import build_parser

REPO = Path(__file__).resolve().parents[1]
MKDOCS = str(Path(sys.executable).parent / "mkdocs")
README = REPO / "README.md"
EMBEDDED = re.compile(r"<!-- embedded:start -->\s*```bash\n(.*?)```\s*<!-- embedded:end -->", re.S)


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("site")
    done = subprocess.run(
        [MKDOCS, "build", "--strict", "--site-dir", str(out)],
        cwd=REPO,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return out


def subcommands(parser: argparse.ArgumentParser) -> list[str]:
    return [
        name for action in parser._actions if isinstance(action, argparse._SubParsersAction) for name in action.choices
    ]


def test_the_site_builds_in_strict_mode(site):
    assert (site / "index.html").is_file() and (site / "benchmarks" / "index.html").is_file()
    assert not (site / "hooks").exists(), "the build hook is not a page of the site"


def test_the_cli_reference_lists_every_command_of_the_parser(site):
    page = html.unescape((site / "cli" / "index.html").read_text())
    assert "<!-- cli-reference -->" not in page, "the hook left its marker in the page"
    names = subcommands(build_parser())
    assert names, "the parser has no subcommands"
    for name in names:
        assert f'id="lklab-{name}"' in page, f"lklab {name} has no section in the CLI reference"
        assert f"usage: lklab {name}" in page, f"lklab {name} has no usage in the CLI reference"


def test_the_readme_is_a_short_front_door():
    lines = README.read_text().splitlines()
    assert len(lines) <= 220, f"README.md has {len(lines)} lines; the manual belongs in docs/"


def test_every_readme_link_into_docs_points_at_a_file():
    links = re.findall(r"\]\(([^)\s]+)\)", README.read_text())
    into_docs = [link for link in links if link.startswith(("docs/", "./docs/"))]
    assert into_docs, "the README links to no page of docs/"
    missing = [link for link in into_docs if not (REPO / link.split("#")[0]).is_file()]
    assert not missing, f"README.md links to files that do not exist: {missing}"


def test_the_operations_page_shows_the_readme_embedded_steps():
    readme = EMBEDDED.search(README.read_text())
    assert readme, "the README's embedded block is missing"
    page = (REPO / "docs" / "operations.md").read_text()
    assert f"```bash\n{readme.group(1)}```" in page, "docs/operations.md's embedded steps differ from the README's"

"""MkDocs hook: the CLI reference page is generated from the ``lklab`` parser at build time.

``docs/cli.md`` holds the marker ``<!-- cli-reference -->``; this hook replaces it with every
subcommand of ``lklab.cli.parser.build_parser()``: its summary, usage, argument groups and flags
with their help, and its example. It only walks argparse objects, so a command or flag added to
the parser appears on the next build with nothing to edit here. The parser is imported when a
page is built (never when MkDocs loads the hook), from the checkout that holds ``mkdocs.yml``.
"""

from __future__ import annotations

import argparse
import html
import re
import sys
from pathlib import Path

MARKER = "<!-- cli-reference -->"
WIDTH = 100  # usage lines are wrapped at this width, whatever the terminal


def on_page_markdown(markdown: str, page, config, files) -> str:
    if MARKER not in markdown:
        return markdown
    return markdown.replace(MARKER, cli_reference(Path(config["config_file_path"]).parent))


def cli_reference(root: Path) -> str:
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))  # this checkout's parser, not another install's
    from lklab.cli.parser import build_parser

    parser = build_parser()
    commands = subcommands(parser)
    out = [escape(parser.description or ""), "", "| command | what it does |", "| --- | --- |"]
    out += [
        f"| [`{parser.prog} {name}`](#{anchor(parser.prog, name)}) | {escape(summary)} |"
        for name, summary, _ in commands
    ]
    for name, summary, command in commands:
        out += ["", f"## {parser.prog} {name}", "", escape(summary or command.description or "")]
        if command.description and command.description != summary:
            out += ["", escape(command.description)]
        out += ["", "```text", usage(command).strip(), "```"]
        for group in command._action_groups:
            rows = [action for action in group._group_actions if shown(action)]
            if not rows:
                continue
            out += ["", f"**{escape(group.title or '')}**", ""]
            if group.description:
                out += [escape(group.description), ""]
            out += ["| argument | help |", "| --- | --- |"]
            out += [f"| {invocation(command, action)} | {escape(help_text(command, action))} |" for action in rows]
        if command.epilog:
            out += ["", "```text", command.epilog.strip(), "```"]
    return "\n".join(out) + "\n"


def subcommands(parser: argparse.ArgumentParser) -> list[tuple[str, str, argparse.ArgumentParser]]:
    """(name, one-line summary, parser) of every subcommand, in the parser's order."""
    found = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            summaries = {choice.dest: choice.help or "" for choice in action._choices_actions}
            found += [(name, summaries.get(name, ""), command) for name, command in action.choices.items()]
    return found


def shown(action: argparse.Action) -> bool:
    return not isinstance(action, argparse._HelpAction) and action.help is not argparse.SUPPRESS


def usage(command: argparse.ArgumentParser) -> str:
    formatter = command.formatter_class(prog=command.prog, width=WIDTH)
    formatter.add_usage(command.usage, command._actions, command._mutually_exclusive_groups)
    return formatter.format_help()


def invocation(command: argparse.ArgumentParser, action: argparse.Action) -> str:
    formatter = command.formatter_class(prog=command.prog, width=WIDTH)
    return f"`{formatter._format_action_invocation(action)}`"


def help_text(command: argparse.ArgumentParser, action: argparse.Action) -> str:
    formatter = command.formatter_class(prog=command.prog, width=WIDTH)
    text = formatter._expand_help(action) if action.help else ""
    if action.choices and not isinstance(action.choices, dict) and "{" not in text:
        text += f" (one of: {', '.join(map(str, action.choices))})"
    return " ".join(text.split())


def escape(text: str) -> str:
    """Plain text in a Markdown table cell or paragraph: no HTML, emphasis, links or cell breaks."""
    return re.sub(r"([\\`*_\[\]|])", r"\\\1", html.escape(text, quote=False))


def anchor(prog: str, name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", f"{prog} {name}".lower()).strip("-")

"""``lklab completion bash|zsh``: a shell completion script, generated from the parser.

The script holds what ``--help`` lists when it is printed: the commands, each command's flags,
and the values of the flags that take one of a few (``--pipeline``: the registry's pipelines;
``--scenario``, ``--window-kind``, ``--table-engine``, an argument's ``choices``); ``--lake``
completes folders and the other path flags files. Pipelines declared in a configuration file
are not in it (it is written once, not each time a word is completed): print it again after
adding a pipeline or upgrading the lab. Installing it:

    lklab completion bash > ~/.local/share/bash-completion/completions/lklab
    lklab completion zsh > "${fpath[1]}/_lklab"    # a folder of zsh's $fpath
"""

from __future__ import annotations

import argparse
import re
from dataclasses import dataclass

__all__ = ["SHELLS", "completion_script", "cmd_completion"]

SHELLS = ("bash", "zsh")
_DIRECTORIES = ("lake",)
_FILES = ("config", "json_out", "sample", "truth_table", "stream_table")


@dataclass(frozen=True)
class _Flag:
    names: tuple[str, ...]
    about: str
    takes_value: bool
    values: tuple[str, ...]
    completes: str  # "directories", "files" or "" (no completion for its value)


@dataclass(frozen=True)
class _Command:
    name: str
    about: str
    flags: tuple[_Flag, ...]
    positionals: tuple[tuple[str, tuple[str, ...], bool], ...]  # (name, choices, repeated)


def _values() -> dict[str, tuple[str, ...]]:
    from lklab.pipelines import REGISTRY
    from lklab.scenarios import SCENARIOS
    from shared.config import TABLE_ENGINES
    from shared.windows import WINDOW_KINDS

    return {
        "--pipeline": tuple(REGISTRY),
        "--scenario": tuple(SCENARIOS),
        "--window-kind": tuple(WINDOW_KINDS),
        "--table-engine": TABLE_ENGINES,
    }


def _about(text: str | None) -> str:
    """The help of a flag or command in a few words: up to its first parenthesis, one line."""
    about = " ".join((text or "").split()).split(" (")[0].rstrip(".")
    return about.replace("[", "(").replace("]", ")").replace(":", ",")


def _quoted(text: str) -> str:
    """``text`` inside a zsh single-quoted word."""
    return text.replace("'", "'\\''")


def _commands(parser: argparse.ArgumentParser) -> tuple[_Command, ...]:
    values = _values()
    sub = next(action for action in parser._actions if isinstance(action, argparse._SubParsersAction))
    summaries = {choice.dest: choice.help for choice in sub._choices_actions}
    commands = []
    for name, command in sub.choices.items():
        flags, positionals = [], []
        for action in command._actions:
            if action.help is argparse.SUPPRESS:
                continue
            if not action.option_strings:
                positionals.append((action.dest, tuple(action.choices or ()), action.nargs in ("+", "*")))
                continue
            completes = "directories" if action.dest in _DIRECTORIES else "files" if action.dest in _FILES else ""
            own = values.get(action.option_strings[-1]) or tuple(map(str, action.choices or ()))
            flags.append(_Flag(tuple(action.option_strings), _about(action.help), action.nargs != 0, own, completes))
        commands.append(_Command(name, _about(summaries.get(name)), tuple(flags), tuple(positionals)))
    return tuple(commands)


def _bash(commands: tuple[_Command, ...]) -> str:
    out = [
        "# bash completion for lklab, written by 'lklab completion bash'",
        "_lklab() {",
        '    local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]} command="" word',
        '    for word in "${COMP_WORDS[@]:1:COMP_CWORD-1}"; do',
        "        case $word in -*) ;; *) command=$word; break ;; esac",
        "    done",
        '    local flags="" positionals=""',
        "    case $command in",
        '    "")',
        f'        COMPREPLY=($(compgen -W "{" ".join(c.name for c in commands)} -h --help --version" -- "$cur"))',
        "        return ;;",
    ]
    for command in commands:
        out.append(f"    {command.name})")
        cases = {}
        for flag in command.flags:
            if not flag.takes_value:
                continue
            if flag.values:
                reply = f'COMPREPLY=($(compgen -W "{" ".join(flag.values)}" -- "$cur"))'
            elif flag.completes == "directories":
                reply = 'COMPREPLY=($(compgen -d -- "$cur"))'
            elif flag.completes == "files":
                reply = 'COMPREPLY=($(compgen -f -- "$cur"))'
            else:
                reply = "compopt +o default 2>/dev/null; COMPREPLY=()"  # a value to type: no file names
            cases.setdefault(reply, []).extend(flag.names)
        if cases:
            out.append("        case $prev in")
            out += [f"        {'|'.join(names)}) {reply}; return ;;" for reply, names in cases.items()]
            out.append("        esac")
        out.append(f'        flags="{" ".join(name for flag in command.flags for name in flag.names)}"')
        choices = [choice for _, own, _ in command.positionals for choice in own]
        if choices:
            out.append(f'        positionals="{" ".join(choices)}"')
        out.append("        ;;")
    out += [
        "    esac",
        "    if [[ $cur == -* ]]; then",
        '        COMPREPLY=($(compgen -W "$flags" -- "$cur"))',
        "    else",  # no choices: empty, and -o default completes file names (ingest's FILE...)
        '        COMPREPLY=($(compgen -W "$positionals" -- "$cur"))',
        "    fi",
        "}",
        "complete -o default -F _lklab lklab",
    ]
    return "\n".join(out) + "\n"


def _zsh_spec(flag: _Flag) -> str:
    names = flag.names[0] if len(flag.names) == 1 else "{" + ",".join(flag.names) + "}"
    exclusive = "'(- *)'" if "--help" in flag.names else ""
    spec = f"{exclusive}{names}'[{_quoted(flag.about)}]"
    if flag.takes_value:
        label = re.sub(r"[^a-z0-9-]", "", flag.names[-1].lstrip("-"))
        if flag.values:
            spec += f":{label}:({' '.join(flag.values)})"
        elif flag.completes == "directories":
            spec += f":{label}:_files -/"
        elif flag.completes == "files":
            spec += f":{label}:_files"
        else:
            spec += f":{label}: "
    return spec + "'"


def _zsh(commands: tuple[_Command, ...]) -> str:
    out = [
        "#compdef lklab",
        "# zsh completion for lklab, written by 'lklab completion zsh'",
        "_lklab() {",
        "    local curcontext=$curcontext state line",
        "    local -a commands",
        "    commands=(",
        *(f"        '{command.name}:{_quoted(command.about)}'" for command in commands),
        "    )",
        "    _arguments -C \\",
        "        '(- *)'{-h,--help}'[show the help and exit]' \\",
        "        '(- *)--version[print the version and exit]' \\",
        "        '1:command:->command' \\",
        "        '*::argument:->argument'",
        "    case $state in",
        "    command) _describe -t commands 'lklab command' commands ;;",
        "    argument)",
        "        case $line[1] in",
    ]
    for command in commands:
        specs = [_zsh_spec(flag) for flag in command.flags]
        for name, choices, repeated in command.positionals:
            completes = f"({' '.join(choices)})" if choices else "_files"
            specs.append(f"'{'*' if repeated else '1'}:{name}:{completes}'")
        out.append(f"        {command.name})")
        out.append("            _arguments \\")
        out += [f"                {spec} \\" for spec in specs[:-1]]
        out.append(f"                {specs[-1]}")
        out.append("            ;;")
    out += ["        esac", "        ;;", "    esac", "}", "", '_lklab "$@"']
    return "\n".join(out) + "\n"


def completion_script(parser: argparse.ArgumentParser, shell: str) -> str:
    """The completion script of ``parser`` for ``shell`` (one of ``SHELLS``)."""
    return {"bash": _bash, "zsh": _zsh}[shell](_commands(parser))


def cmd_completion(args: argparse.Namespace) -> int:
    from lklab.cli.parser import build_parser

    print(completion_script(build_parser(), args.shell), end="")
    return 0

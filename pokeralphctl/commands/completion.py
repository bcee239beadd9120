"""``pokeralphctl completion bash|zsh|fish``: shell completion for commands and subcommands.

eval "$(pokeralphctl completion bash)"                       # ~/.bashrc
pokeralphctl completion zsh > "${fpath[1]}/_pokeralphctl"     # zsh
pokeralphctl completion fish > ~/.config/fish/completions/pokeralphctl.fish
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import argparse

    from pokeralphctl.commands import Context

SUBCOMMANDS: dict[str, list[str]] = {
    "task": ["list", "add", "show", "edit", "rm"],
    "battle": [
        "start",
        "pause",
        "resume",
        "cancel",
        "approve",
        "resolve",
        "show",
        "history",
        "report",
        "log",
        "revert",
    ],
    "rules": ["list", "add", "rm", "test"],
    "config": ["get", "set", "unset"],
    "daemon": ["start", "stop", "status"],
    "service": ["install", "uninstall", "status"],
    "prd": ["show", "set-name", "set-description", "import"],
    "inbox": ["list", "show"],
    "completion": ["bash", "zsh", "fish"],
    "notify": ["test"],
}
OPTIONS = ["--json", "--repo", "--socket", "--no-autostart", "--verbose", "--help"]


def add_completion(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("shell", choices=["bash", "zsh", "fish"])
    parser.set_defaults(handler=completion)


def _commands() -> list[str]:
    from pokeralphctl.cli import COMMANDS

    return list(COMMANDS)


def bash() -> str:
    cases = "\n".join(
        f'        {name}) words="{" ".join(subs)}" ;;' for name, subs in SUBCOMMANDS.items()
    )
    return f"""# bash completion for pokeralphctl
_pokeralphctl() {{
    local cur="${{COMP_WORDS[COMP_CWORD]}}" words=""
    if [ "$COMP_CWORD" -eq 1 ]; then
        words="{" ".join(_commands())}"
    elif [ "$COMP_CWORD" -eq 2 ]; then
        case "${{COMP_WORDS[1]}}" in
{cases}
        esac
    fi
    case "$cur" in -*) words="{" ".join(OPTIONS)}" ;; esac
    COMPREPLY=( $(compgen -W "$words" -- "$cur") )
}}
complete -F _pokeralphctl pokeralphctl
"""


def zsh() -> str:
    cases = "\n".join(
        f"    {name}) _values 'subcommand' {' '.join(subs)} ;;"
        for name, subs in SUBCOMMANDS.items()
    )
    return f"""#compdef pokeralphctl
_pokeralphctl() {{
  if (( CURRENT == 2 )); then
    _values 'command' {" ".join(_commands())}
  elif (( CURRENT == 3 )); then
    case $words[2] in
{cases}
    esac
  fi
}}
_pokeralphctl "$@"
"""


def fish() -> str:
    lines = ["# fish completion for pokeralphctl", "complete -c pokeralphctl -f"]
    for name in _commands():
        lines.append(f"complete -c pokeralphctl -n __fish_use_subcommand -a {name}")
    for name, subs in SUBCOMMANDS.items():
        lines.append(
            f"complete -c pokeralphctl -n '__fish_seen_subcommand_from {name}' -a '{' '.join(subs)}'"
        )
    for option in OPTIONS:
        lines.append(f"complete -c pokeralphctl -l {option.lstrip('-')}")
    return "\n".join(lines) + "\n"


def completion(ctx: Context, args: argparse.Namespace) -> int:
    """Invoked when calling ``pokeralphctl completion SHELL``."""
    ctx.out.write({"bash": bash, "zsh": zsh, "fish": fish}[args.shell]())
    return 0

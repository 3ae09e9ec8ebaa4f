"""`halo-cluster completion bash|zsh|fish`: the shell's completion script, made from the command
table (each command's NAME, SUMMARY and OPTIONS), so that a new command or option completes
without an edit here."""

from __future__ import annotations

import sys

from halo_cluster.tools.commands import NAMES, command, exits, text

NAME = "completion"
SUMMARY = "print the shell completion script for bash, zsh or fish"
OPTIONS: tuple[tuple[str, str], ...] = ()
HELP = text.page(
    "halo-cluster completion bash|zsh|fish",
    """
Prints the script that completes halo-cluster's commands and options in your shell. Load it
from your shell's start-up file:

  bash:  eval "$(halo-cluster completion bash)"         in ~/.bashrc
  zsh:   eval "$(halo-cluster completion zsh)"          in ~/.zshrc, after compinit
  fish:  halo-cluster completion fish > ~/.config/fish/completions/halo-cluster.fish""",
    OPTIONS,
    NAME,
    'eval "$(halo-cluster completion bash)"',
)
GLOBAL = ("--config", "--state", "--version", "--help")
COMMON = ("--config", "--state", "--help")  # what every command takes besides its own
VALUED = ("--config", "--state")  # the global options that take a value: not a COMMAND after


def table() -> dict[str, tuple[str, tuple[str, ...]]]:
    """Each command's summary and option names."""
    tables = {}
    for name in NAMES:
        module = command(name)
        tables[name] = (module.SUMMARY, (*text.names(module.OPTIONS), *COMMON))
    return tables


def bash() -> str:
    cases = "\n".join(
        f'        {name}) words="{" ".join(options)}" ;;' for name, (_, options) in table().items()
    )
    valued = f'[[ " {" ".join(VALUED)} " == *" $prev "* ]]'  # the word after is their value
    return f"""\
# halo-cluster's completion for bash: eval "$(halo-cluster completion bash)"
_halo_cluster() {{
    local cur=${{COMP_WORDS[COMP_CWORD]}} prev= command= words i
    for ((i = 1; i < COMP_CWORD; i++)); do
        case ${{COMP_WORDS[i]}} in
            -*) ;;
            *) {valued} || {{ command=${{COMP_WORDS[i]}}; break; }} ;;
        esac
        prev=${{COMP_WORDS[i]}}
    done
    case $command in
        "") words="{" ".join((*NAMES, *GLOBAL))}" ;;
{cases}
        *) words="" ;;
    esac
    COMPREPLY=($(compgen -W "$words" -- "$cur"))
}}
complete -o default -F _halo_cluster halo-cluster
"""


def _single(word: str) -> str:
    """WORD in fish's single quotes."""
    return "'" + word.replace("\\", "\\\\").replace("'", "\\'") + "'"


def zsh() -> str:
    # NAME:SUMMARY, the first colon separating them; in POSIX single quotes
    described = "\n".join(
        "    '" + f"{name}:{summary}".replace("'", "'\\''") + "'"
        for name, (summary, _) in table().items()
    )
    cases = "\n".join(
        f"    {name}) compadd -- {' '.join(options)} ;;" for name, (_, options) in table().items()
    )
    return f"""\
#compdef halo-cluster
# halo-cluster's completion for zsh: eval "$(halo-cluster completion zsh)" after compinit
_halo_cluster() {{
  local -a commands
  commands=(
{described}
  )
  if (( CURRENT == 2 )); then
    _describe -t commands 'halo-cluster command' commands
    compadd -- {" ".join(GLOBAL)}
    return
  fi
  case ${{words[2]}} in
{cases}
  esac
  _files
}}
compdef _halo_cluster halo-cluster
"""


def fish() -> str:
    lines = [
        "# halo-cluster's completion for fish: halo-cluster completion fish > "
        "~/.config/fish/completions/halo-cluster.fish",
        "complete -c halo-cluster -n __fish_use_subcommand -l config -r -F -d 'the cluster.yml'",
        "complete -c halo-cluster -n __fish_use_subcommand -l state -r -a "
        "'(__fish_complete_directories)' -d 'the state folder'",
        "complete -c halo-cluster -n __fish_use_subcommand -l version -d 'the version'",
    ]
    for name, (summary, options) in table().items():
        lines.append(
            f"complete -c halo-cluster -n __fish_use_subcommand -f -a {name} -d {_single(summary)}"
        )
        for option in options:
            kind = "-l " + option[2:] if option.startswith("--") else "-s " + option[1:]
            lines.append(f"complete -c halo-cluster -n '__fish_seen_subcommand_from {name}' {kind}")
    return "\n".join(lines) + "\n"


SHELLS = {"bash": bash, "zsh": zsh, "fish": fish}


def main(argv: list[str]) -> int:
    from halo_cluster.tools import options

    parser = options.parser("halo-cluster completion", None, exits.ERROR)
    parser.add_argument("shell", choices=tuple(SHELLS), metavar="bash|zsh|fish")
    shell = parser.parse_args(argv).shell
    sys.stdout.write(SHELLS[shell]())
    return exits.OK

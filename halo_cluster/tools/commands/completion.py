"""`halo-cluster completion bash|zsh|fish`: the shell's completion script, made from the command
table (each command's NAME, SUMMARY, OPTIONS and the words it takes, `WORDS`), so that a new
command or option completes without an edit here. After `--limit` and `--exclude` the scripts
offer the config's node names, which `halo-cluster completion nodes` prints (the config the
command line names with `--config`, else the default one)."""

from __future__ import annotations

import sys
from pathlib import Path

from halo_cluster.tools.commands import NAMES, command, exits, text

NAME = "completion"
SUMMARY = "print the shell completion script for bash, zsh or fish"
OPTIONS: tuple[tuple[str, str], ...] = ()
WORDS = ("bash", "zsh", "fish")  # what completes after `completion`
HELP = text.page(
    "halo-cluster completion bash|zsh|fish",
    """
Prints the script that completes halo-cluster's commands and options in your shell, and the
node names of your config after --limit and --exclude. Load it from your shell's start-up file:

  bash:  eval "$(halo-cluster completion bash)"         in ~/.bashrc
  zsh:   eval "$(halo-cluster completion zsh)"          in ~/.zshrc, after compinit
  fish:  halo-cluster completion fish > ~/.config/fish/completions/halo-cluster.fish

`halo-cluster completion nodes` prints the config's node names, one a line (nothing when the
config cannot be read): what the scripts offer after --limit and --exclude.""",
    OPTIONS,
    NAME,
    'eval "$(halo-cluster completion bash)"',
)
GLOBAL = ("--config", "--state", "--version", "--help")
COMMON = ("--config", "--state", "--help")  # what every command takes besides its own
VALUED = ("--config", "--state")  # the global options that take a value: not a COMMAND after
NODE_VALUED = ("--limit", "--exclude")  # the options whose value is a node of the config
NODES = 'halo-cluster ${config:+--config "$config"} completion nodes 2>/dev/null'  # sh


def table() -> dict[str, tuple[str, tuple[str, ...], tuple[str, ...]]]:
    """Each command's summary, option names and words."""
    tables = {}
    for name in NAMES:
        module = command(name)
        options = (*text.names(module.OPTIONS), *COMMON)
        tables[name] = (module.SUMMARY, options, getattr(module, "WORDS", ()))
    return tables


def node_names() -> list[str]:
    """The node names of the config the command line names: read as the loader reads YAML
    (bounded), none when it cannot be, so that a completion prints no error."""
    from halo_cluster.config.model import ConfigError
    from halo_cluster.config.rules import node_name
    from halo_cluster.config.yamlread import parse_yaml, read_config
    from halo_cluster.tools import project

    path = Path(project.config())
    try:
        doc, _ = parse_yaml(read_config(path, str(path)), str(path))
    except ConfigError:
        return []
    nodes = doc.get("nodes") if isinstance(doc, dict) else None
    names = [n.get("name") for n in nodes if isinstance(n, dict)] if isinstance(nodes, list) else []
    return [name for name in names if isinstance(name, str) and node_name(name) is None]


def bash() -> str:
    cases = "\n".join(
        f'            {name}) words="{" ".join((*options, *words))}" ;;'
        for name, (_, options, words) in table().items()
    )
    valued = f'[[ " {" ".join(VALUED)} " == *" $prev "* ]]'  # the word after is their value
    return f"""\
# halo-cluster's completion for bash: eval "$(halo-cluster completion bash)"
_halo_cluster() {{
    local cur=${{COMP_WORDS[COMP_CWORD]}} prev= command= config= words i
    for ((i = 1; i < COMP_CWORD; i++)); do
        [[ ${{COMP_WORDS[i]}} == --config ]] && config=${{COMP_WORDS[i+1]}}
        if [[ -z $command ]]; then
            case ${{COMP_WORDS[i]}} in
                -*) ;;
                *) {valued} || command=${{COMP_WORDS[i]}} ;;
            esac
        fi
        prev=${{COMP_WORDS[i]}}
    done
    if [[ -n $command && " {" ".join(NODE_VALUED)} " == *" $prev "* ]]; then
        words=$({NODES})
    else
        case $command in
            "") words="{" ".join((*NAMES, *GLOBAL))}" ;;
{cases}
            *) words="" ;;
        esac
    fi
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
        for name, (summary, _, _) in table().items()
    )
    cases = "\n".join(
        f"    {name}) compadd -- {' '.join((*options, *words))} ;;"
        for name, (_, options, words) in table().items()
    )
    nodes = "|".join(NODE_VALUED)
    return f"""\
#compdef halo-cluster
# halo-cluster's completion for zsh: eval "$(halo-cluster completion zsh)" after compinit
_halo_cluster() {{
  local -a commands
  local config= i=${{words[(i)--config]}}
  (( i < CURRENT - 1 )) && config=${{words[i+1]}}
  commands=(
{described}
  )
  if (( CURRENT == 2 )); then
    _describe -t commands 'halo-cluster command' commands
    compadd -- {" ".join(GLOBAL)}
    return
  fi
  case ${{words[CURRENT-1]}} in
    ({nodes}) compadd -- ${{(f)"$({NODES})"}}; return ;;
  esac
  case ${{words[2]}} in
{cases}
  esac
  _files
}}
compdef _halo_cluster halo-cluster
"""


FISH_NODES = """\
function __halo_cluster_nodes
    set -l words (commandline -opc)
    set -l config
    for i in (seq (count $words))
        if test "$words[$i]" = --config; and test $i -lt (count $words)
            set config --config $words[(math $i + 1)]
        end
    end
    halo-cluster $config completion nodes 2>/dev/null
end"""


def fish() -> str:
    lines = [
        "# halo-cluster's completion for fish: halo-cluster completion fish > "
        "~/.config/fish/completions/halo-cluster.fish",
        FISH_NODES,
        "complete -c halo-cluster -n __fish_use_subcommand -l config -r -F -d 'the cluster.yml'",
        "complete -c halo-cluster -n __fish_use_subcommand -l state -r -a "
        "'(__fish_complete_directories)' -d 'the state folder'",
        "complete -c halo-cluster -n __fish_use_subcommand -l version -d 'the version'",
    ]
    for name, (summary, options, words) in table().items():
        lines.append(
            f"complete -c halo-cluster -n __fish_use_subcommand -f -a {name} -d {_single(summary)}"
        )
        seen = f"-n '__fish_seen_subcommand_from {name}'"
        for option in options:
            kind = "-l " + option[2:] if option.startswith("--") else "-s " + option[1:]
            nodes = " -x -a '(__halo_cluster_nodes)'" if option in NODE_VALUED else ""
            lines.append(f"complete -c halo-cluster {seen} {kind}{nodes}")
        if words:
            lines.append(f"complete -c halo-cluster {seen} -f -a {_single(' '.join(words))}")
    return "\n".join(lines) + "\n"


SHELLS = {"bash": bash, "zsh": zsh, "fish": fish}


def main(argv: list[str]) -> int:
    from halo_cluster.tools import options

    parser = options.parser("halo-cluster completion", None, exits.ERROR)
    parser.add_argument("shell", choices=(*SHELLS, "nodes"), metavar="bash|zsh|fish|nodes")
    shell = parser.parse_args(argv).shell
    if shell == "nodes":
        sys.stdout.write("".join(f"{name}\n" for name in node_names()))
    else:
        sys.stdout.write(SHELLS[shell]())
    return exits.OK

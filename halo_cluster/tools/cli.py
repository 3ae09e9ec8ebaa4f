"""`halo-cluster`: the dispatcher. It reads the global options (`--config`, `--state`,
`--version`, `--help`), prints a command's help page for `COMMAND --help`, and runs the
command's `main` (halo_cluster/tools/commands/), whose exit code reaches the caller unchanged
(docs/ci.md).

    halo-cluster [--config PATH] [--state DIR] COMMAND [ARGS...]

The config is `--config PATH` (once, before or after COMMAND, never empty), else $CLUSTER_CONFIG,
else cluster.yml in the checkout (or, for an installed wheel, in the current directory). The
state folder (config/state.py) is `--state DIR` likewise, else $HALO_STATE, else `.halo-cluster/`
beside the config; both are passed on in the environment (the state folder as an absolute path,
the deploy's pyinfra running in another folder). It
imports nothing but the command table and argparse: pyinfra, pytest and the config loader are
the commands' own imports, each when it runs (`halo-cluster --help` answers within 0.2 s).
"""

from __future__ import annotations

import argparse
import os
import sys

from halo_cluster.config import state
from halo_cluster.tools import options
from halo_cluster.tools.commands import NAMES, command, exits, text

PROG = "halo-cluster"
HELP = ("-h", "--help")
USAGE = "[--config PATH] [--state DIR] COMMAND [ARGS...]"
# the global options, before or after COMMAND: (metavar, help, the variable that passes it on)
GLOBAL = {
    "--config": ("PATH", "the cluster.yml to use", "CLUSTER_CONFIG"),
    "--state": ("DIR", "the state folder (else .halo-cluster/ beside the config)", "HALO_STATE"),
}
DESCRIPTION = """Provision AMD Strix Halo machines into a vLLM cluster described by cluster.yml.

commands:
{commands}

The config is --config PATH (before or after COMMAND), else $CLUSTER_CONFIG, else cluster.yml
in the checkout (else the current folder). What the tool keeps (the lock, Ray's token, reports/)
is in the state folder: --state DIR, else $HALO_STATE, else .halo-cluster/ beside the config.
After `--`, ARGS go to the command as they are.
`halo-cluster COMMAND --help`: what it does, its options, its exit codes and an example.
Shell completion: `halo-cluster completion bash|zsh|fish`."""


def _parser() -> options.Parser:
    commands = "\n".join(f"  {name:10} {command(name).SUMMARY}" for name in NAMES)
    parser = options.parser(
        PROG,
        text.fitted(DESCRIPTION.format(commands=commands)),
        exits.USAGE,
        usage=text.fitted(f"usage: {PROG} {USAGE}").removeprefix("usage: "),
    )
    for name, (metavar, what, _) in GLOBAL.items():
        parser.add_argument(name, metavar=metavar, action="append", help=what)
    parser.add_argument("--version", action="store_true", help="the installed version")
    parser.add_argument("command", nargs="?", metavar="COMMAND", help=argparse.SUPPRESS)
    parser.add_argument("args", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    return parser


def _globals_after_command(
    parser: options.Parser, args: list[str]
) -> tuple[dict[str, list[str]], list[str], bool]:
    """Every global option's values given after COMMAND (`--config PATH`, `--config=PATH`), the
    other ARGS in their order, and whether `-h`/`--help` is among them (by hand: argparse may
    reorder what it does not know, the deploy's and verify's options). A `--` ends halo-cluster's
    options: what follows goes to the command as it is, without the `--` (the deploy would read
    `-- --dry` as an inventory named `--dry`)."""
    found: dict[str, list[str]] = {name: [] for name in GLOBAL}
    rest, helped = [], False
    items = iter(args)
    for arg in items:
        name = arg.partition("=")[0]
        if arg == "--":
            rest.extend(items)
        elif arg in GLOBAL:
            value = next(items, None)
            found[arg].append(
                parser.error(f"{arg} needs a {GLOBAL[arg][0]}") if value is None else value
            )
        elif name in GLOBAL:
            found[name].append(arg.partition("=")[2])
        else:
            helped = helped or arg in HELP
            rest.append(arg)
    return found, rest, helped


def _one(parser: options.Parser, name: str, values: list[str]) -> str | None:
    """The one value of global option NAME, a path: an empty one is an error (a script's unset
    variable must not deploy whatever $CLUSTER_CONFIG names), and so is a second one (which
    would win without a word)."""
    first = values[0] if values else None
    if first is not None or values:
        from halo_cluster.config.rules import file_path

        if problem := options.problem(name, first, len(values), file_path):
            parser.error(problem)
    return first


def version() -> str:
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    try:
        return f"{PROG} {installed(PROG)}"
    except PackageNotFoundError:
        return f"{PROG}: not installed (run from a source folder)"


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    parsed = parser.parse_args(sys.argv[1:] if argv is None else argv)
    if parsed.version:
        print(version())
        return exits.OK
    if parsed.command not in NAMES:
        from halo_cluster.config.quoting import quote

        known = ", ".join(NAMES)
        given = f"unknown COMMAND {quote(parsed.command)}" if parsed.command else "no COMMAND"
        parser.error(f"{given}: give one of {known} (--help)")
    after, args, helped = _globals_after_command(parser, parsed.args)
    run = command(parsed.command)
    if helped:
        print(text.fitted(run.HELP))  # at the terminal's width
        return exits.OK

    def started() -> int:
        for name, (_, _, variable) in GLOBAL.items():
            given = _one(parser, name, [*(getattr(parsed, name[2:]) or []), *after[name]])
            if given is not None:
                # every command reads the variable, and so do the deploy and the checks it starts
                os.environ[variable] = given
        if folder := os.environ.get(state.ENV):
            if problem := state.problem(folder):  # before the work, not a traceback after it
                given_by = "--state" if after["--state"] or parsed.state else f"${state.ENV}"
                parser.refuse(f"{given_by} {problem}")
            os.environ[state.ENV] = os.path.abspath(folder)  # the deploy runs in another folder
        try:
            return run.main(args)
        except KeyboardInterrupt:  # the traceback would say nothing the user does not know
            print(f"{PROG} {parsed.command}: interrupted (Ctrl-C)", file=sys.stderr)
            return exits.INTERRUPTED

    if "--json" in args and "--json" in text.names(run.OPTIONS):
        from halo_cluster.tools import jsonout  # one document on stdout, whatever happens

        return jsonout.only_document(parsed.command, started)
    return started()


if __name__ == "__main__":
    sys.exit(main())

"""`--limit NODE` and `--exclude NODE`: the nodes a command reaches, for every command `deploy`
included (each repeatable, a node's name in cluster.yml, exactly: not pyinfra's groups or globs,
which only the deploy could take). A name the config does not have is refused in one line,
never read as "no node": a typo would otherwise leave a node out without a word."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from halo_cluster.config.quoting import quote
from halo_cluster.tools import options

if TYPE_CHECKING:  # the help pages declare OPTIONS: no config model for `--help`
    from halo_cluster.config.model import Cluster, Node

LIMIT, EXCLUDE = "--limit", "--exclude"
# the options as every command's help page lists them (commands/*.py OPTIONS)
OPTIONS = (
    (f"{LIMIT} NODE", "only this node (a name from cluster.yml); repeatable"),
    (f"{EXCLUDE} NODE", "every node but this one; repeatable"),
)


class Refused(ValueError):
    """A selection refused: its one line, naming the option and the value."""


def declared() -> list[tuple[str, str, str]]:
    """Each option's name, metavar and help, from OPTIONS: for argparse here, for pytest's
    parser in the verification (tests/infra/conftest.py)."""
    return [(*typed.split(" "), what) for typed, what in OPTIONS]


def add(parser: options.Parser) -> None:
    """`--limit NODE` and `--exclude NODE` on a command's parser, each repeatable."""
    for name, metavar, what in declared():
        parser.add_argument(name, metavar=metavar, action="append", default=[], help=what)


def select(cluster: Cluster, limit: Sequence[str], exclude: Sequence[str]) -> list[Node]:
    """The nodes `--limit` (every node when none is given) and `--exclude` leave, in config
    order; `Refused` for an empty or unknown name, or when no node is left."""
    names = [n.name for n in cluster.nodes]
    for option, given in ((LIMIT, limit), (EXCLUDE, exclude)):
        for name in given:
            if name == "":
                raise Refused(f"{option}: empty value: give a node's name, or leave it out")
            if name not in names:
                raise Refused(
                    f"{option} {quote(name)}: no such node in cluster.yml "
                    f"(its nodes: {', '.join(names)})"
                )
    chosen = [n for n in cluster.nodes if (not limit or n.name in limit) and n.name not in exclude]
    if not chosen:
        raise Refused(f"{LIMIT} and {EXCLUDE} leave no node to run on")
    return chosen


def pyinfra_name(name: str) -> str:
    """NAME as pyinfra's `--limit` takes it exactly: pyinfra reads a group first (a node named
    `head` would be the head) and otherwise a glob, and `[h]ead` is no group and, as a node's
    name has no glob character (rules.node_name), matches only NAME."""
    return f"[{name[0]}]{name[1:]}" if name else name


def left_out(cluster: Cluster, chosen: Sequence[Node]) -> list[str]:
    """The names of the nodes a selection leaves out, in config order."""
    kept = {n.name for n in chosen}
    return [n.name for n in cluster.nodes if n.name not in kept]


def chosen(prog: str, cluster: Cluster, args: argparse.Namespace) -> list[Node] | None:
    """The nodes ARGS' `--limit` and `--exclude` select; None once the refusal is said, one
    line `PROG: ...` on stderr (the command then exits with its usage error), before any host
    is contacted."""
    try:
        return select(cluster, args.limit, args.exclude)
    except Refused as refused:
        print(f"{prog}: {refused}", file=sys.stderr)
        return None


def left_out_line(prog: str, out: Sequence[str]) -> str | None:
    """The one line naming the nodes a selection leaves out (`left_out`: not read, not judged),
    or None."""
    return f"{prog}: left out by {LIMIT}/{EXCLUDE}: {', '.join(out)} (not read)" if out else None

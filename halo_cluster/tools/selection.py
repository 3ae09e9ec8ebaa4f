"""`--limit NODE` and `--exclude NODE`: the nodes a command reaches, as `deploy` takes them
(each repeatable, a name from cluster.yml). A name the config does not have is refused in one
line, never read as "no node": a typo would otherwise leave a node out without a word."""

from __future__ import annotations

from collections.abc import Sequence

from halo_cluster.config.model import Cluster, Node
from halo_cluster.config.quoting import quote
from halo_cluster.tools import options

LIMIT, EXCLUDE = "--limit", "--exclude"


class Refused(ValueError):
    """A selection refused: its one line, naming the option and the value."""


def add(parser: options.Parser) -> None:
    """`--limit NODE` and `--exclude NODE` on a command's parser, each repeatable."""
    parser.add_argument(LIMIT, metavar="NODE", action="append", default=[],
                        help="only this node (a name from cluster.yml); repeatable")  # fmt: skip
    parser.add_argument(EXCLUDE, metavar="NODE", action="append", default=[],
                        help="every node but this one; repeatable")  # fmt: skip


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


def left_out(cluster: Cluster, chosen: Sequence[Node]) -> list[str]:
    """The names of the nodes a selection leaves out, in config order."""
    kept = {n.name for n in chosen}
    return [n.name for n in cluster.nodes if n.name not in kept]

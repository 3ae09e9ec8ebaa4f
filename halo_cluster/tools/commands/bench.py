"""`halo-cluster bench`: the serving cluster benchmarked (halo_cluster/tools/bench/)."""

from __future__ import annotations

import argparse
import sys

from halo_cluster.tools import selection
from halo_cluster.tools.commands import exits, text

NAME = "bench"
PROG = f"halo-cluster {NAME}"
SUMMARY = "benchmark the serving cluster, keep and compare the results"
OPTIONS = (
    ("--compare", "compare the last two runs only, running nothing"),
    ("--json", "the report as one JSON document on stdout"),
    *selection.OPTIONS,
)
HELP = text.page(
    "halo-cluster bench [--compare] [--json]",
    """
Runs vLLM's own benchmark inside the head's vLLM container against the serving cluster, at each
concurrency level of `bench.concurrency`, with the seeded random workload of `bench.*`. Every
result is kept under reports/bench/ in the state folder and compared with the previous run of
the same configuration (the same image, model, serve settings, kernel and firmware); a report.md
says the result, and chart.svg beside it draws output tokens per second and time to first token
against concurrency, one line per build. The API key never appears on a command line. The
benchmark runs on the head against vLLM, which serves across every node, and the run's key holds
each node's kernel and firmware: --limit and --exclude are checked, and a selection that leaves
a node out (the head, or a worker) is refused with its reason.""",
    OPTIONS,
    NAME,
    "halo-cluster bench",
)


def main(argv: list[str]) -> int:
    from halo_cluster.tools import options
    from halo_cluster.tools.bench import run

    parser = options.parser(PROG, None, exits.ERROR)
    selection.add(parser)
    chosen, rest = parser.parse_known_args(argv)
    if (chosen.limit or chosen.exclude) and not _every_node(chosen):
        return exits.ERROR
    return run.main(rest)


def _every_node(args: argparse.Namespace) -> bool:
    """Whether `--limit` and `--exclude` leave every node in; else False once said, one line
    naming the option and why."""
    from halo_cluster.config.quoting import quote
    from halo_cluster.tools import project

    cluster = project.load_or_say(project.config())
    nodes = None if cluster is None else selection.chosen(PROG, cluster, args)
    if cluster is None or nodes is None:
        return False
    out, head = selection.left_out(cluster, nodes), cluster.head.name
    if head in args.exclude:
        why = f"{selection.EXCLUDE} {quote(head)}: bench runs on the head, {head}"
    elif head in out:
        why = f"{selection.LIMIT} without the head ({head}): bench runs on the head"
    elif out:
        why = (
            f"{', '.join(out)} left out: vLLM serves across every node and the run's key holds "
            "each node's kernel and firmware"
        )
    else:
        return True
    print(f"{PROG}: {why}: leave every node in", file=sys.stderr)
    return False

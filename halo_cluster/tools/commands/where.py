"""`halo-cluster where`: where vLLM answers, from the config alone (halo_cluster/tools/where.py)."""

from __future__ import annotations

import sys

from halo_cluster.tools import selection
from halo_cluster.tools.commands import exits, text

NAME = "where"
PROG = f"halo-cluster {NAME}"  # the start of its own lines
SUMMARY = "where vLLM answers: its URL, a curl line, the status command"
OPTIONS = (("--json", "the same as one JSON document, for scripts"), *selection.OPTIONS)
HELP = text.page(
    "halo-cluster where [--json] [--limit NODE] [--exclude NODE]",
    """
Prints vLLM's URL, one curl line that works from this machine (run on the head over SSH when
vLLM listens on the data link only) and the status command for this config. It reads only the
config: it contacts no node and writes nothing. The API key is read from `serve.api_key_file`
by the shell running the curl line: it is never printed. With --limit or --exclude it checks the
names against the config and says in one line which nodes are left out.""",
    OPTIONS,
    NAME,
    "halo-cluster where --config ~/cluster/cluster.yml",
)


def main(argv: list[str]) -> int:
    from halo_cluster.tools import jsonout, options, project, where

    parser = options.parser(PROG, None, exits.ERROR)
    parser.flag("--json", "the same as one JSON document")
    selection.add(parser)
    args = parser.parse_args(argv)
    config = project.config()
    cluster = project.load_or_say(config)
    if cluster is None:
        return exits.BAD_CONFIG
    nodes = selection.chosen(PROG, cluster, args)
    if nodes is None:
        return exits.ERROR
    if out := selection.left_out_line(PROG, selection.left_out(cluster, nodes)):
        print(out, file=sys.stderr)
    pending = project.next_deploy(cluster)
    if args.json:
        document = {"exit_code": exits.OK, "next_deploy": pending}
        jsonout.emit(NAME, document | where.document(cluster, config))
        return exits.OK
    print("\n".join([*([pending] if pending else []), *where.lines(cluster, config)]))
    return exits.OK

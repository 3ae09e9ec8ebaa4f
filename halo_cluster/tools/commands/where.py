"""`halo-cluster where`: where vLLM answers, from the config alone (halo_cluster/tools/where.py)."""

from __future__ import annotations

from halo_cluster.tools.commands import exits, text

NAME = "where"
SUMMARY = "where vLLM answers: its URL, a curl line, the status command"
OPTIONS: tuple[tuple[str, str], ...] = ()
HELP = text.page(
    "halo-cluster where",
    """
Prints vLLM's URL, one curl line that works from this machine (run on the head over SSH when
vLLM listens on the data link only) and the status command for this config. It reads only the
config: it contacts no node and writes nothing. The API key is read from `serve.api_key_file`
by the shell running the curl line: it is never printed.""",
    OPTIONS,
    NAME,
    "halo-cluster where --config ~/cluster/cluster.yml",
)


def main(argv: list[str]) -> int:
    from halo_cluster.tools import options, project, where

    options.parser("halo-cluster where", None, exits.ERROR).parse_args(argv)
    config = project.config()
    cluster = project.load_or_say(config)
    if cluster is None:
        return exits.BAD_CONFIG
    pending = project.next_deploy(cluster)
    print("\n".join([*([pending] if pending else []), *where.lines(cluster, config)]))
    return exits.OK

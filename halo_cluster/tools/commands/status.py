"""`halo-cluster status`: the serving cluster in one table (halo_cluster/tools/status.py)."""

from __future__ import annotations

from halo_cluster.tools.commands import text

NAME = "status"
SUMMARY = "the serving cluster in one table: Ray, each service, vLLM"
OPTIONS = (("--json", "the same as JSON, for scripts"),)
HELP = text.page(
    "halo-cluster status [--json]",
    """
Reads every node at once over SSH and shows, per node, its services (state, restarts, since
when, the last error of a failed one), the image build its containers run, its kernel and
firmware, and from the head Ray's nodes and vLLM's health, model and URL.""",
    OPTIONS,
    NAME,
    "halo-cluster status --json",
)


def main(argv: list[str]) -> int:
    from halo_cluster.tools import status

    return status.main(argv)

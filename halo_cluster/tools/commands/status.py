"""`halo-cluster status`: the serving cluster in one table (halo_cluster/tools/status/)."""

from __future__ import annotations

from halo_cluster.tools import selection
from halo_cluster.tools.commands import text

NAME = "status"
SUMMARY = "the serving cluster in one table: Ray, each service, vLLM"
OPTIONS = (("--json", "the same as JSON, for scripts"), *selection.OPTIONS)
HELP = text.page(
    "halo-cluster status [--json] [--limit NODE] [--exclude NODE]",
    """
Reads every node at once over SSH and shows, per node, its services (state, restarts, since
when, the last error of a failed one), the image build its containers run, its kernel and
firmware, and from the head Ray's nodes and vLLM's health, model and URL. With --limit or
--exclude only the nodes left in are read and judged, and one line names those left out; with
the head left out, Ray and vLLM are not read (one node in maintenance: --exclude NODE). With
metrics on, it also shows the last 5 minutes from the head's Prometheus: requests running and
waiting, tokens per second, time to first token (median and 95th percentile), and per node GPU
busy, memory available and GTT used. A node whose commands do not answer within 15 s is one line
naming it and what did not answer. With serving off (`serve.enabled: false`) it still reads each
node: whether it answers, the image its containers run, its kernel and firmware.""",
    OPTIONS,
    NAME,
    "halo-cluster status --json",
)


def main(argv: list[str]) -> int:
    from halo_cluster.tools.status import view

    return view.main(argv)

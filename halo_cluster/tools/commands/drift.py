"""`halo-cluster drift`: what a deploy would change on each node (halo_cluster/tools/drift.py)."""

from __future__ import annotations

from halo_cluster.tools import selection
from halo_cluster.tools.commands import exits, text

NAME = "drift"
SUMMARY = "what a deploy would change on each node, changing nothing"
OPTIONS = (
    ("--json", "the summary as one JSON document on stdout instead of text"),
    ("--json-out PATH", "where the JSON summary goes (default: the state folder's reports/)"),
    ("--md-out PATH", "where the Markdown summary goes (default: beside --json-out, as .md)"),
    *selection.OPTIONS,
)
HELP = text.page(
    "halo-cluster drift [OPTIONS]",
    """
A dry run of the deploy: for each node, whether it is converged, what would change (with file
diffs), or why it was refused or could not be reached. It never changes a node. Besides its
text it writes a JSON and a Markdown summary, for a CI job or a pull-request comment. With
--limit or --exclude only the nodes left in are planned and judged, and one line names those
left out.""",
    OPTIONS,
    NAME,
    "halo-cluster drift || [ $? -eq 2 ]   # pass on drift, fail on an error",
)


def main(argv: list[str]) -> int:
    from halo_cluster.tools import drift
    from halo_cluster.tools.commands import found

    files = found.files(NAME)
    return drift.main(argv, files.entry) if files else exits.ERROR

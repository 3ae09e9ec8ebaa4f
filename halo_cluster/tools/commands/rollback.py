"""`halo-cluster rollback`: every node back on the previous build (tools/upgrading/)."""

from __future__ import annotations

from halo_cluster.tools.commands import text

NAME = "rollback"
SUMMARY = "every node back on the previous build of the image"
OPTIONS = (
    ("--limit NODE", "refused: every node goes back at once"),
    ("--exclude NODE", "refused: every node goes back at once"),
)
HELP = text.page(
    "halo-cluster rollback",
    """
Moves every node back to the image build the lock (halo-cluster.lock in the state folder,
.halo-cluster/ beside cluster.yml) records as the previous one, and waits until vLLM serves it
again. Every node must run one image, so a
--limit or --exclude that leaves a node out is refused.""",
    OPTIONS,
    NAME,
    "halo-cluster rollback",
)


def main(argv: list[str]) -> int:
    from halo_cluster.tools.upgrading import imagemain

    return imagemain.main_rollback(argv)

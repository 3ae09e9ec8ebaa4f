"""`halo-cluster rollback`: every node back on the previous build (tools/upgrade.py)."""

from __future__ import annotations

from halo_cluster.tools.commands import text

NAME = "rollback"
SUMMARY = "every node back on the previous build of the image"
OPTIONS: tuple[tuple[str, str], ...] = ()
HELP = text.page(
    "halo-cluster rollback",
    """
Moves every node back to the image build the lock (halo-cluster.lock, beside cluster.yml) records as
the previous one, and waits until vLLM serves it again.""",
    OPTIONS,
    NAME,
    "halo-cluster rollback",
)


def main(argv: list[str]) -> int:
    from halo_cluster.tools import upgrade

    return upgrade.main_rollback(argv)

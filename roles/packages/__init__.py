"""Packages: the RDMA user space tools of the guide, plus what every other role declares."""

from pyinfra import host
from pyinfra.api import deploy
from pyinfra.facts.rpm import RpmPackages
from pyinfra.operations import server

from halo_cluster.node.context import NodeContext
from halo_cluster.node.nodefiles import cached

ORDER = 10
# the guide's RDMA tools (installed on thunderbolt nodes too: perftest helps there) and what the
# deploy's own facts run (ethtool, ip)
PACKAGES = ("rdma-core", "libibverbs-utils", "perftest", "ethtool", "iproute")


def paths(data) -> tuple[str, ...]:
    return ()


def reads(data) -> tuple[tuple[type, dict], ...]:
    return ((RpmPackages, {}),)


@deploy("Packages")
def apply(node: NodeContext) -> None:
    # decided from the rpm database alone: a converged node runs no dnf command at all
    installed = cached(host, RpmPackages)
    missing = [p for p in node.packages if p not in installed]
    if missing:
        server.shell(
            name=f"Install {' '.join(missing)}",
            commands=[f"dnf install -y {' '.join(missing)}"],
        )

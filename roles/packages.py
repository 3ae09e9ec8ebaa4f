"""Packages: the RDMA user space tools, plus what the later roles run."""

from pyinfra import host
from pyinfra.api import deploy
from pyinfra.facts.rpm import RpmPackages
from pyinfra.operations import server

from halo_cluster.config import BASE_PACKAGES, CONTAINER_PACKAGES
from halo_cluster.nodefiles import cached

DEFAULTS = {"halo_packages": [*BASE_PACKAGES, *CONTAINER_PACKAGES]}


@deploy("Packages", data_defaults=DEFAULTS)
def packages() -> None:
    # decided from the rpm database alone: a converged node runs no dnf command at all
    installed = cached(host, RpmPackages)
    missing = [p for p in host.data.halo_packages if p not in installed]
    if missing:
        server.shell(
            name=f"Install {' '.join(missing)}", commands=[f"dnf install -y {' '.join(missing)}"]
        )

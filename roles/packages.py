"""Packages: the RDMA user space tools, plus what the later roles run."""

from pyinfra import host
from pyinfra.api import deploy
from pyinfra.operations import dnf

DEFAULTS = {
    "halo_packages": [
        "rdma-core",
        "libibverbs-utils",
        "perftest",
        "ethtool",
        "iproute",
        "podman",
        "toolbox",
    ],
}


@deploy("Packages", data_defaults=DEFAULTS)
def packages() -> None:
    # dnf.packages decides from the rpm database: a converged node runs no dnf command
    dnf.packages(
        name="Install the RDMA tools, podman and toolbox", packages=host.data.halo_packages
    )

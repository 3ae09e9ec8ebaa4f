"""The network role's key: the data link's MTU."""

from __future__ import annotations

from pathlib import Path

from halo_cluster.config.model import Cluster, Problems
from halo_cluster.config.schema import Field, variables

MTU_RANGES = {"roce": (1280, 9216), "thunderbolt": (68, 65522)}

SECTION: tuple[Field, ...] = (
    Field("mtu", "integer", 9000, "MTU of the data link (roce 1280-9216, thunderbolt 68-65522)."),
)
# host data it reads beyond its section: other sections' keys, values hostdata.py derives
READS = (
    "halo_interconnect",
    "halo_nm_connection",
    "halo_data_address",
    "halo_data_prefix",
    "halo_data_mac",
    "halo_node",
    "halo_data_interface",
    "halo_nm_uuid",
)
VARIABLES = variables(SECTION, READS)


def derive(cluster: Cluster, problems: Problems, base_dir: Path) -> None:
    """A check only: the MTU the link allows."""
    mtu, link = cluster.settings["mtu"], cluster.interconnect
    low, high = MTU_RANGES[link]
    if not low <= mtu <= high:
        problems.error("mtu", f"{mtu} is outside {low}-{high}, the range {link} allows")

"""The network role's key, the data link's MTU, and its NetworkManager profile's names."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from pathlib import Path

from halo_cluster.config.model import Cluster, Problems
from halo_cluster.config.schema import Field, variables

MTU_RANGES = {"roce": (1280, 9216), "thunderbolt": (68, 65522)}
# the profile's id and keyfile name: fixed, so a re-run finds the profile it made
CONNECTION = "halo-data"

SECTION: tuple[Field, ...] = (
    Field("mtu", "integer", 9000, "MTU of the data link (roce 1280-9216, thunderbolt 68-65522)."),
)
# host data it reads beyond its section: the cluster section's keys, values hostdata.py derives,
# and what its `derive` below gives
READS = (
    "halo_interconnect",
    "halo_network_connection",
    "halo_data_address",
    "halo_data_prefix",
    "halo_data_mac",
    "halo_node",
    "halo_data_interface",
    "halo_network_uuids",
)
VARIABLES = variables(SECTION, READS)


@dataclass(frozen=True)
class Network:
    """The data link's NetworkManager profile: host data `halo_network_connection` (its id),
    `halo_network_uuids` (its UUID by node name) and `halo_network_mtu` (the link's MTU, checked
    against the link's range: what another role reads of it)."""

    connection: str
    uuids: dict[str, str]
    mtu: int


def derive(cluster: Cluster, problems: Problems, base_dir: Path) -> Network:
    """The profile's names, and a check: the MTU the link allows."""
    mtu, link = cluster.settings["mtu"], cluster.interconnect
    low, high = MTU_RANGES[link]
    if not low <= mtu <= high:
        problems.error("mtu", f"{mtu} is outside {low}-{high}, the range {link} allows")
    # from the node's name: every run writes the same keyfile
    uuids = {
        node.name: str(uuid.uuid5(uuid.NAMESPACE_URL, f"halo-cluster:{node.name}:data"))
        for node in cluster.nodes
    }
    return Network(CONNECTION, uuids, mtu)

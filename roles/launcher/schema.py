"""The launcher role has no key of its own."""

from __future__ import annotations

from halo_cluster.config.schema import Field, variables

SECTION: tuple[Field, ...] = ()
# host data it reads beyond its section: other sections' keys, values hostdata.py derives
READS = (
    "halo_cluster_user",
    "halo_role",
    "halo_toolbox",
    "halo_head_address",
    "halo_worker_addresses",
    "halo_peers",
    "halo_node",
    "halo_interconnect",
    "halo_data_address",
    "halo_container_left",  # the nodes that left cluster.yml: their host keys stay pinned
)
VARIABLES = variables(SECTION, READS)

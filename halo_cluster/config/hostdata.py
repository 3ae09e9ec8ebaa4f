"""The pyinfra inventory adapter: the cluster model as host data, in the groups `head` and
`workers`. Every value a role reads about its node is here, under a `halo_` name."""

from __future__ import annotations

from typing import Any

from halo_cluster.config.connect import CONNECT_SECONDS
from halo_cluster.config.model import Cluster, Node


def host_data(cluster: Cluster, node: Node) -> dict[str, Any]:
    """Everything a role needs about one node, as pyinfra host data (JSON-friendly)."""
    peers = [n for n in cluster.nodes if n.name != node.name]
    data: dict[str, Any] = {
        "ssh_hostname": node.ssh_host,
        "ssh_port": node.ssh_port,
        "ssh_user": node.ssh_user,
        "ssh_paramiko_connect_kwargs": {
            "timeout": CONNECT_SECONDS,
            "banner_timeout": CONNECT_SECONDS,
        },
        "halo_config_file": cluster.source,  # cluster.yml as read: the refusals name it
        "halo_node": node.name,
        "halo_role": node.role,
        "halo_interconnect": cluster.interconnect,
        "halo_data_interface": node.interface,
        "halo_data_mac": node.mac,
        "halo_data_address": node.address,
        "halo_data_prefix": cluster.subnet.prefixlen,
        "halo_peers": {p.name: p.address for p in peers},
        "halo_head_address": cluster.head.address,
        "halo_worker_addresses": [w.address for w in cluster.workers],
        "halo_cluster_user": cluster.cluster_user,
        "halo_image": cluster.image,
        "halo_toolbox": cluster.toolbox,
    }
    for name, value in cluster.values().items():
        # a role's value: its plain key, or what its section derives; a list, as JSON has
        data.setdefault(name, list(value) if isinstance(value, tuple) else value)
    if node.ssh_key:
        data["ssh_key"] = node.ssh_key
    if node.ssh_known_hosts:
        data["ssh_known_hosts_file"] = node.ssh_known_hosts
        data["ssh_strict_host_key_checking"] = "yes"
    return data


def inventory_groups(cluster: Cluster) -> dict[str, list[tuple[str, dict[str, Any]]]]:
    """pyinfra inventory groups: `head` and `workers`, each a list of (name, host data)."""
    return {
        "head": [(cluster.head.name, host_data(cluster, cluster.head))],
        "workers": [(n.name, host_data(cluster, n)) for n in cluster.workers],
    }

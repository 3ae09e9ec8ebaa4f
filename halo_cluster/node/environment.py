"""The cluster's environment on a node: what the launcher's cluster.env renders and the serve
role's containers start from (one place, so the two never disagree)."""

from __future__ import annotations

from pyinfra import host

from halo_cluster.node.context import NodeContext


def environment_values(node: NodeContext) -> dict:
    """What cluster.env.j2 renders from; the serve role's serve.env starts from the same."""
    return {
        "node": host.data.halo_node,
        "role": host.data.halo_role,
        "head_ip": host.data.halo_head_address,
        "worker_ips": host.data.halo_worker_addresses,
        "toolbox": host.data.halo_toolbox,
        "node_ip": host.data.halo_data_address,
        "interface": node.interface or host.data.halo_data_interface,
        "interconnect": host.data.halo_interconnect,
        "hca": node.rdma_device,
    }

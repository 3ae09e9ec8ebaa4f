"""The cluster's environment on a node: what the launcher's cluster.env renders and the serve
role's containers start from (one place, so the two never disagree)."""

from __future__ import annotations

from pyinfra import host

from halo_cluster.decide.rdmatools import hca_pin
from halo_cluster.node.context import NodeContext


def roce_nccl(hca: str | None) -> dict[str, str]:
    """RCCL's settings for RoCE v2 on the E810, written by cluster.env and serve.env alike: GID
    index 1 (RoCE v2 over IPv4), the retry timing, no GPU Direct RDMA on this APU, and the data
    port's HCA pinned (`hca`, NCCL_IB_HCA's value: node_hca) when the node has one."""
    values = {
        "NCCL_IB_GID_INDEX": "1",
        "NCCL_IB_TIMEOUT": "23",
        "NCCL_IB_RETRY_CNT": "7",
        "NCCL_NET_GDR_LEVEL": "0",
    }
    return values | ({"NCCL_IB_HCA": hca} if hca else {})


def node_hca(node: NodeContext) -> str | None:
    """The data port's RDMA device as RCCL is pinned to it: by its name now and the name
    rdma-core's udev rule gives it at the next boot (`NodeContext.rdma_names`), so the pin
    written before that boot still finds it after."""
    return hca_pin(node.rdma_names) if node.rdma_names else None


def environment_values(node: NodeContext) -> dict:
    """What cluster.env.j2 renders from; the serve role's serve.env starts from the same."""
    return {
        "node": host.data.halo_node,
        "role": host.data.halo_role,
        "head_ip": host.data.halo_head_address,
        "worker_ips": host.data.halo_worker_addresses,
        "toolbox": host.data.halo_toolbox,
        "node_ip": host.data.halo_data_address,
        "interface": node.data_interface,
        "interconnect": host.data.halo_interconnect,
        # kyuz0's launcher exports VLLM_ROCE_HCA as NCCL_IB_HCA (cluster_manager.py): one value
        "hca": node_hca(node),
        "roce_nccl": roce_nccl(node_hca(node)),
    }

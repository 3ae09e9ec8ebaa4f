"""`serve.transport: rdma`: may vLLM start on this node? A pure decision from `rdma link`.

With rdma, RCCL is pinned to its IB/RoCE network (`NCCL_NET=IB`), which only lists ACTIVE ports:
a missing or DOWN port fails vLLM's start after minutes of loading. The deploy reads the port
first and refuses with the port and the fix instead.
"""

from __future__ import annotations

from halo_cluster.decide.rdmatools import RdmaLink

ACTIVE = "ACTIVE"
FIX = "check the cable and `rdma link` on the node, or set serve.transport: sockets"


def rdma_port_problem(
    interface: str | None,
    device: str | None,
    links: list[RdmaLink],
    drivers_loading: bool = False,
) -> str | None:
    """Why vLLM must not start with `serve.transport: rdma`, or None when the data port's RDMA
    device is ACTIVE.

    `device`: the port's RDMA device from sysfs (the Hardware fact), `links`: `rdma link` as
    `rdmatools.parse_rdma_link` reads it (the port's link found by device, else by netdev).
    `drivers_loading`: the E810 drivers were not loaded when the node was read and this run
    loads them: the state read is not the one vLLM will see, so nothing is refused (RCCL's
    `NCCL_IB_DISABLE=0 NCCL_NET=IB` still fails loudly if the port does not come up)."""
    if drivers_loading:
        return None
    port = interface or "the data port"
    found = [
        link
        for link in links
        if (device and link["device"] == device) or (interface and link["netdev"] == interface)
    ]
    if not found:
        named = f" ({device} not in `rdma link`)" if device else ""
        return f"{port} has no RDMA device{named}: {FIX}"
    link = found[0]
    if link["state"] == ACTIVE:
        return None
    state = f"state {link['state'] or 'unknown'}"
    if link["physical_state"]:
        state += f", physical_state {link['physical_state']}"
    return f"{port} has no ACTIVE RDMA device ({link['device']} {state}): {FIX}"

"""The device groups of the cluster user: the user role puts the user in them, and the serve role
restarts the user's systemd manager when it runs without them."""

from __future__ import annotations


def device_groups(interconnect: str) -> list[str]:
    """The groups that own the devices the services use: render /dev/dri/renderD* and /dev/kfd,
    video /dev/dri/card*, rdma /dev/infiniband/* (roce)."""
    return ["render", "video"] + (["rdma"] if interconnect == "roce" else [])

"""What the deploy itself reads on every node, beside the roles' `reads(data)`: deploy.py
declares them, and the plan harness answers the same reads (tests/plan/harness.py)."""

from __future__ import annotations

from typing import Any

from halo_cluster.node.facts import (
    DataPortHardware,
    Hardware,
    HardwareInfo,
    NetworkInterfaces,
    SshSessionInterfaces,
)
from halo_cluster.node.memory import NodeMemory
from halo_cluster.node.nodefiles import cached, snapshot_read
from halo_cluster.node.reads import Read


def own_reads(data: Any) -> tuple[Read, ...]:
    """The interfaces, the SSH sessions, the snapshot, the node's memory (preflight and the
    memory budget) and the data port's hardware: of the interface the config names, or of the
    port the node finds by MAC or as `auto`'s one E810 port (DataPortHardware), before the
    safety check resolves it."""
    found = ((NetworkInterfaces, {}), (SshSessionInterfaces, {"port": data.ssh_port}))
    return (*found, snapshot_read(data), (NodeMemory, {}), hardware_read(data))


def hardware_read(data: Any) -> Read:
    mac, name = data.get("halo_data_mac"), data.get("halo_data_interface")
    if mac is None and name != "auto":
        return Hardware, {"interface": name}
    return DataPortHardware, {"mac": mac}


def data_port_hardware(host: Any, interface: str | None) -> HardwareInfo:
    """The resolved data interface's hardware: from the one read when the node found the same
    port, else read for it (a second command, only when the node's and the check's differ)."""
    fact, kwargs = hardware_read(host.data)
    if fact is DataPortHardware:
        found = cached(host, fact, **kwargs)
        if found["port"] == interface:
            return found["hardware"]
    return cached(host, Hardware, interface=interface)

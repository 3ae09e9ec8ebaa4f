"""What deploy.py resolved about a node before any role runs: the facts every role may read."""

from __future__ import annotations

from dataclasses import dataclass

from halo_cluster.decide import rdmatools
from halo_cluster.node.facts import HardwareInfo, Interface


@dataclass(frozen=True)
class NodeContext:
    """`interface`: the data interface (None when it is not there yet, as thunderbolt0 before the
    cable); `interfaces`: the NetworkInterfaces fact; `hardware`: the Hardware fact;
    `ssh_interfaces`: the interfaces that carry SSH sessions to the node (its management side);
    `packages`: every package the roles declare (the packages role installs them);
    `configured`: the data interface cluster.yml names (`halo_data_interface`: a name, `auto`,
    or None when bound by MAC)."""

    interface: str | None
    interfaces: dict[str, Interface]
    hardware: HardwareInfo
    ssh_interfaces: tuple[str, ...] = ()
    packages: tuple[str, ...] = ()
    configured: str | None = None

    @property
    def data_interface(self) -> str | None:
        """The data interface as found, else as configured (thunderbolt0 before its cable)."""
        return self.interface or self.configured

    @property
    def has_infiniband(self) -> bool:
        return bool(self.hardware.get("infiniband"))

    @property
    def rdma_device(self) -> str | None:
        """The data port's RDMA device (pinned for RCCL), when the node has one."""
        return (self.hardware.get("rdma") or [None])[0]

    @property
    def rdma_names(self) -> list[str]:
        """The RDMA device's name now and the one rdma-core's udev rule gives it at the next
        boot (rdmatools.persistent_name), when they differ: RCCL's pin names both, so it
        finds the device before and after the rename."""
        if not self.rdma_device:
            return []
        pci = rdmatools.parse_pci(self.hardware.get("pci") or "")
        later = rdmatools.persistent_name(pci)
        return list(dict.fromkeys([self.rdma_device, *([later] if later else [])]))

    @property
    def loaded_modules(self) -> list[str]:
        return list(self.hardware.get("modules") or [])

"""firewalld on every node: running, the data link in the trusted zone (from its NetworkManager
profile), and what the management side lets in (docs/roles/firewall.md)."""

from __future__ import annotations

from halo_cluster.node import firewalld

from .target import Target


def test_firewalld_running(node: Target, measured) -> None:
    state = node.firewall["state"]
    assert state == "running", (
        f"{node.name}: firewalld is {state}: nothing closes Ray's ports to the management "
        "network; `systemctl enable --now firewalld` (the packages role installs it)"
    )
    measured(f"default zone {node.firewall['default']}")


def test_data_link_in_the_trusted_zone(node: Target, measured) -> None:
    zone = firewalld.zone_of(node.firewall, node.interface)
    assert zone == firewalld.DATA_ZONE, (
        f"{node.name}: {node.interface} is in zone {zone or 'none'}, expected "
        f"{firewalld.DATA_ZONE}: RCCL and Ray between the nodes are blocked; re-run the deploy "
        "(it activates halo-data again, whose profile says zone=trusted)"
    )
    measured(f"{node.interface} in {zone}")

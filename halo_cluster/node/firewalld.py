"""firewalld as the deploy sees it: which zone an interface is in, which ports a zone lets in
(the network and firewall roles and the checks read it; the firewall role's operations are in
roles/firewall/operations.py).

Decisions read the Firewalld fact (facts.py); nothing here reads a node by itself.
"""

from __future__ import annotations

DATA_ZONE = "trusted"  # the data link's zone, set by its NetworkManager profile (as the guide)
# zones that let every port in, whatever their port list says
OPEN_TARGETS = ("ACCEPT",)
OPEN_ZONES = (DATA_ZONE,)


def running(state: dict) -> bool:
    return state.get("state") == "running"


def zone_of(state: dict, interface: str) -> str:
    """The zone an interface is in now: the zone that names it, else the default zone."""
    for zone, settings in state.get("runtime", {}).items():
        if interface in settings.get("interfaces", []):
            return zone
    return state.get("default", "")


def management_zones(state: dict, ssh_interfaces, data_interface: str | None) -> set[str]:
    """The zones of the interfaces SSH reaches the node by, the data link and loopback aside."""
    return {
        zone_of(state, interface)
        for interface in ssh_interfaces
        if interface not in (data_interface, "lo")
    }


def zones_with_service(state: dict, service: str, view: str) -> set[str]:
    return {z for z, s in state.get(view, {}).items() if service in s.get("services", [])}


def open_ports(settings: dict, ports: list[int]) -> list[int]:
    """Which of `ports` (TCP) a zone lets in by its target or its port list (services aside)."""
    if settings.get("target", [""])[0] in OPEN_TARGETS:
        return list(ports)
    ranges = [_port_range(entry) for entry in settings.get("ports", [])]
    return [p for p in ports if any(low <= p <= high for low, high in ranges if low)]


def _port_range(entry: str) -> tuple[int, int]:
    """'8000/tcp' -> (8000, 8000); '1025-65535/tcp' -> (1025, 65535); UDP -> (0, 0)."""
    ports, _, protocol = entry.partition("/")
    if protocol != "tcp":
        return 0, 0
    low, _, high = ports.partition("-")
    return int(low), int(high or low)


def exposed_in(state: dict, zone: str, ports: list[int]) -> list[int]:
    """Ports of `ports` a zone lets in, at runtime or after the next reload."""
    if zone in OPEN_ZONES:
        return list(ports)
    found = set()
    for view in ("runtime", "permanent"):
        found.update(open_ports(state.get(view, {}).get(zone, {}), ports))
    return sorted(found)

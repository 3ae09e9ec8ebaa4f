"""Firewall: firewalld lets vLLM's port in on the management side only with `serve.listen: all`,
Prometheus' only with `metrics.listen: all` (node_exporter's never: it binds the data address),
and never Ray's nor the native launcher's master port (`serve.master_port`, where the ranks meet
on the head): those belong on the data link, whose `trusted` zone comes from its NetworkManager
profile. They listen on every address, so a zone of any other network of the node that lets
them in (Fedora Workstation's default zone lets 1025-65535 in) refuses the node in its preflight,
before anything changes; the deploy changes no zone it does not own."""

from __future__ import annotations

from typing import Any

from pyinfra import host, logger
from pyinfra.api import deploy
from pyinfra.operations import server

from halo_cluster.config.serving import ray_ports
from halo_cluster.decide.preflight import FAIL, OK, Check
from halo_cluster.node import firewalld
from halo_cluster.node.context import NodeContext
from halo_cluster.node.firewalldfact import Firewalld
from halo_cluster.node.nodefiles import cached, node_files
from halo_cluster.node.operations import text_file
from halo_cluster.node.render import templates
from halo_cluster.roles.firewall.operations import reload_firewall, zone_service

render = templates(__name__)  # templates/firewall/

ORDER = 35
PACKAGES = ("firewalld",)
# our firewalld services: each lets one port in on the head's management side, when its role says
SERVICES = {"halo-vllm": "vLLM", "halo-prometheus": "Prometheus"}  # service: what it lets in


def service_file(service: str) -> str:
    return f"/etc/firewalld/services/{service}.xml"


def paths(data) -> tuple[str, ...]:
    return tuple(service_file(s) for s in SERVICES)


def reads(data) -> tuple[tuple[type, dict], ...]:
    return ((Firewalld, {}),)


@deploy("Firewall")
def apply(node: NodeContext) -> None:
    state = cached(host, Firewalld)
    if not firewalld.running(state):
        _warn_not_running(state)
        return
    management = firewalld.management_zones(state, node.ssh_interfaces, node.interface)
    for service, port in open_to_management().items():
        wanted = management if port is not None else set()
        if wanted:
            _write_service_file(service, port)
        _converge_service_zones(state, service, wanted)
        if not wanted and node_files(host).exists(service_file(service)):
            path = service_file(service)
            server.shell(name=f"Remove {path}", commands=[f"rm -f {path}"])


def open_to_management() -> dict[str, int | None]:
    """Each service's port the head lets in on its management side (None: closed): vLLM's with
    `serve.listen: all`, Prometheus' with `metrics.listen: all`; a worker's, none."""
    data = host.data
    head = data.halo_role == "head"
    ports = (data.halo_serve_exposed_port, data.halo_metrics_exposed_port)
    return {s: port if head else None for s, port in zip(SERVICES, ports, strict=True)}


def _write_service_file(service: str, port: int) -> None:
    """Our service's definition; firewalld knows a new or changed one only after a reload."""
    text = render(f"{service}.xml.j2", port=port)
    path = service_file(service)
    if node_files(host).differs(path, text, "644"):
        text_file(name=f"firewalld service {path}", path=path, text=text)
        reload_firewall(name="Reload firewalld (its services changed)")


def _converge_service_zones(state: dict, service: str, wanted: set[str]) -> None:
    """Our service in exactly the wanted zones, now and after a reload."""
    runtime = firewalld.zones_with_service(state, service, "runtime")
    permanent = firewalld.zones_with_service(state, service, "permanent")
    for zone in sorted(wanted - (runtime & permanent)):
        zone_service(
            name=f"Open {SERVICES[service]}'s port in zone {zone}", zone=zone, service=service
        )
    for zone in sorted((runtime | permanent) - wanted):
        zone_service(
            name=f"Close {SERVICES[service]}'s port in zone {zone}",
            zone=zone,
            service=service,
            present=False,
        )


def _warn_not_running(state: dict) -> None:
    if host.data.halo_serve_ray_listens:
        logger.warning(
            f"{host.print_prefix}firewalld is {state['state']}: Ray's ports are open to every "
            "network this node is on (`systemctl enable --now firewalld`)"
        )
    if master_port(host.data) is not None:
        logger.warning(
            f"{host.print_prefix}firewalld is {state['state']}: vLLM's master port "
            f"{master_port(host.data)} is open to every network this node is on "
            "(`systemctl enable --now firewalld`)"
        )


def master_port(data: Any) -> int | None:
    """The native launcher's rendezvous port, where the head listens (None: not here)."""
    return data.halo_serve_master_port_listens if data.halo_role == "head" else None


def listening(data: Any) -> list[tuple[str, list[int], str]]:
    """(what, its ports, what anyone who reaches them can do) of ours that listen on every
    address of this node and belong on the data link alone."""
    found = []
    if data.halo_serve_ray_listens:
        found.append(("Ray's ports", ray_ports(), "run code on the cluster"))
    port = master_port(data)
    if port is not None:
        found.append(
            ("vLLM's master port (serve.master_port)", [port], "join the cluster's vLLM ranks")
        )
    return found


def preflight(node_host: Any, node: NodeContext) -> list[Check]:
    """Every zone the node's networks are in (each interface's but the data link's, and each
    zone with a source: `firewalld.zones_in_effect`), judged before anything changes: one that
    lets Ray's ports or the master port in refuses the node, with the fix. Nothing to judge
    while nothing of ours listens or firewalld is not running (apply warns then)."""
    state = cached(node_host, Firewalld)
    ours = listening(node_host.data)
    if not ours or not firewalld.running(state):
        return []
    zones = firewalld.zones_in_effect(state, node.interfaces, node.data_interface)
    problems = [
        _exposed(state, zone, where, what, found, harm)
        for zone, where in zones.items()
        for what, ports, harm in ours
        if (found := firewalld.exposed_in(state, zone, ports))
    ]
    if problems:
        return [Check("firewall", FAIL, "; ".join(problems), refuses=True)]
    judged = ", ".join(f"{zone} ({', '.join(where)})" for zone, where in zones.items())
    names = " and ".join(what for what, _, _ in ours)
    return [Check("firewall", OK, f"no zone lets {names} in: {judged or 'no interface'}")]


def _exposed(state: dict, zone: str, where: list[str], what: str, ports: list[int], harm: str):
    """One zone's refusal: what puts it in effect, what it lets in, and the two fixes."""
    default = "; the default zone" if zone == state.get("default") else ""
    entries = firewalld.port_entries(state, zone, ports)
    removal = " ".join(f"--remove-port={entry}" for entry in entries)
    remove = (
        f"remove {', '.join(entries)} from it (firewall-cmd --permanent --zone={zone} "
        f"{removal} && firewall-cmd --reload) or "
        if entries
        else ""
    )
    return (
        f"zone {zone} ({', '.join(where)}{default}) lets {what} in ({_ranges(ports)}): anyone "
        f"there can {harm}; {remove}put {', '.join(where)} in a stricter zone (`nmcli "
        "connection modify PROFILE connection.zone public`; for the default zone's, "
        "`firewall-cmd --set-default-zone=public`)"
    )


def _ranges(ports: list[int]) -> str:
    runs: list[list[int]] = []
    for port in ports:
        if runs and port == runs[-1][1] + 1:
            runs[-1][1] = port
        else:
            runs.append([port, port])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)

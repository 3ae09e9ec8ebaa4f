"""Safety checks before any change on a node: pure decisions from facts already read.

A problem stops that node (nothing on it changes); a warning is printed and the run goes on.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from halo_cluster.config.datalink import THUNDERBOLT_NAME
from halo_cluster.config.docs import page

INTEL_VENDOR = "0x8086"
# E810 PCI device ids (field-notes.md): C backplane, C QSFP, C SFP, XXV backplane, QSFP, SFP
E810_DEVICES = {"0x1591", "0x1592", "0x1593", "0x1599", "0x159a", "0x159b"}
THUNDERBOLT_NET = "thunderbolt-net"  # the driver of a host-to-host Thunderbolt link's interface
# login.defs on Fedora: UID_MIN 1000, UID_MAX 60000; outside are system accounts (and nobody,
# 65534), whose home is / or /nonexistent: config time sees only the name, the node the number
REGULAR_UIDS = range(1000, 60001)


@dataclass
class Verdict:
    interface: str | None = None
    problems: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def e810_ports(interfaces: dict[str, dict]) -> list[str]:
    return sorted(
        name
        for name, info in interfaces.items()
        if info["vendor"] == INTEL_VENDOR and info["device"] in E810_DEVICES
    )


def describe(interfaces: dict[str, dict]) -> str:
    """`name (vendor:device driver)` for every interface but loopback."""
    found = [
        f"{name} ({info['vendor'] or 'virtual'}:{info['device'] or '-'} {info['driver'] or '-'})"
        for name, info in sorted(interfaces.items())
        if name != "lo"
    ]
    return ", ".join(found) or "none"


def resolve_interface(
    interfaces: dict[str, dict], name: str | None, mac: str | None
) -> tuple[str | None, str | None]:
    """The data interface's name from the config's selector, or (None, problem)."""
    if mac is not None:
        matches = [n for n, info in interfaces.items() if (info["mac"] or "").lower() == mac]
        if not matches:
            return None, f"no interface has MAC {mac} (found: {describe(interfaces)})"
        return matches[0], None
    if name == "auto":
        ports = e810_ports(interfaces)
        if len(ports) != 1:
            what = "no E810 port" if not ports else f"{len(ports)} E810 ports ({', '.join(ports)})"
            return None, (
                f"interface auto: {what}; set nodes[].data.interface "
                f"(found: {describe(interfaces)})"
            )
        return ports[0], None
    links = sorted(n for n, info in interfaces.items() if info["driver"] == THUNDERBOLT_NET)
    if name not in interfaces or (links and interfaces[name]["driver"] != THUNDERBOLT_NET):
        if name and THUNDERBOLT_NAME.fullmatch(name) and len(links) == 1:
            # thunderbolt-net numbers its interfaces as they come (thunderbolt1 with a dock's
            # before it): the host-to-host link is the one interface it drives
            return links[0], None
        if name not in interfaces:
            return None, f"interface {name} not found (found: {describe(interfaces)})"
    return name, None


def cluster_user_problem(passwd: str, user: str | None) -> str | None:
    """The cluster user must be a regular login user on the node, or not exist yet (the deploy
    creates it): a system account would get the GPU groups, lingering and the services."""
    for line in passwd.splitlines():
        fields = line.split(":")
        if fields[0] == user and len(fields) > 2 and fields[2].isdigit():
            uid = int(fields[2])
            if uid not in REGULAR_UIDS:
                return (
                    f"cluster_user {user} is a system account here (uid {uid}, outside "
                    f"{REGULAR_UIDS.start}-{REGULAR_UIDS.stop - 1}): choose a regular login user "
                    "or a new name"
                )
    return None


def check_node(
    data: dict,
    os_release: dict[str, str],
    interfaces: dict[str, dict],
    ssh_sessions: list[dict[str, str]],
    passwd: str = "",
) -> Verdict:
    """Decide whether the deploy may change this node, and on which data interface."""
    verdict = Verdict()
    if os_release.get("ID") != "fedora":
        pretty = os_release.get("PRETTY_NAME") or "unknown"
        # which Fedora releases, and what each one gives: the os role's preflight (its releases)
        verdict.problems.append(
            f"not Fedora ({pretty}); halo-cluster provisions Fedora Linux (its releases: "
            f"{page('roles/os.md')})"
        )
        return verdict
    if problem := cluster_user_problem(passwd, data.get("halo_cluster_user")):
        verdict.problems.append(problem)
        return verdict
    name, problem = resolve_interface(
        interfaces, data["halo_data_interface"], data["halo_data_mac"]
    )
    if problem:
        if data["halo_interconnect"] == "thunderbolt" and data["halo_data_mac"] is None:
            # thunderbolt0 appears only once the cable is in and thunderbolt_net is loaded
            verdict.warnings.append(f"{problem}; the profile activates when it appears")
            return verdict
        verdict.problems.append(problem)
        return verdict
    if not ssh_sessions:
        verdict.problems.append(
            "cannot tell which interface carries the SSH session (`ss` saw none)"
        )
        return verdict
    own = set(interfaces[name]["addresses"])
    for session in ssh_sessions:
        carried = session["interface"] == name or any(
            a.split("/")[0] == session["local"] for a in own
        )
        if carried:
            verdict.problems.append(
                f"{name} carries the SSH session ({session['local']}); "
                "reconfiguring it would cut this connection: choose another data interface"
            )
            return verdict
    verdict.interface = name
    return verdict

"""Lab wiring: one network namespace per node, a management veth to the host, and the data link.

Every name the lab creates on the host starts with `halolab-` (namespaces) or `hl-` (host veth
ends), so that `lab down` can find and remove exactly what the lab made, even after a crash.
"""

from __future__ import annotations

from pathlib import Path

from lab import sh

NETNS_PREFIX = "halolab-"
HOST_VETH_PREFIX = "hl-"
SWITCH = f"{NETNS_PREFIX}switch"
DATA_INTERFACE = {"roce": "enp1s0f0np0", "thunderbolt": "thunderbolt0"}
MGMT_INTERFACE = "mgmt0"


def netns(node: str) -> str:
    return f"{NETNS_PREFIX}{node}"


def mgmt_addresses(index: int) -> tuple[str, str]:
    """(host end, node end) of node `index` (1-based) on its own /30."""
    return f"10.99.{index}.1", f"10.99.{index}.2"


def data_mac(index: int) -> str:
    return f"02:00:c0:a8:64:{index:02x}"


def lab_namespaces() -> list[str]:
    run = Path("/run/netns")
    return sorted(p.name for p in run.glob(f"{NETNS_PREFIX}*")) if run.exists() else []


def create(nodes: list[str], link: str) -> None:
    for index, node in enumerate(nodes, start=1):
        _create_node_netns(node, index)
    interface = DATA_INTERFACE[link]
    if len(nodes) == 2:
        peer = ("name", interface, "netns", netns(nodes[1]), "address", data_mac(2))
        _data_veth(interface, nodes[0], 1, peer)
        return
    # More than two nodes meet on a simulated switch: a bridge in its own namespace.
    sh.run("ip", "netns", "add", SWITCH)
    sh.run("ip", "-n", SWITCH, "link", "add", "br0", "mtu", "9216", "type", "bridge")
    for index, node in enumerate(nodes, start=1):
        port = f"sw-{node}"[:15]
        _data_veth(interface, node, index, ("name", port, "netns", SWITCH))
        sh.run("ip", "-n", SWITCH, "link", "set", port, "mtu", "9216", "master", "br0", "up")
    sh.run("ip", "-n", SWITCH, "link", "set", "br0", "up")


def _data_veth(interface: str, node: str, index: int, peer: tuple[str, ...]) -> None:
    """The node's data link, created straight into its namespace under the real name."""
    sh.run(
        "ip",
        "link",
        "add",
        interface,
        "netns",
        netns(node),
        "address",
        data_mac(index),
        "type",
        "veth",
        "peer",
        *peer,
    )


def _create_node_netns(node: str, index: int) -> None:
    ns = netns(node)
    host_ip, node_ip = mgmt_addresses(index)
    host_end = f"{HOST_VETH_PREFIX}{node}"[:15]
    sh.run("ip", "netns", "add", ns)
    # Fixed MACs: a rebooted node must not wait on a stale ARP entry of the host.
    sh.run(
        "ip",
        "link",
        "add",
        host_end,
        "address",
        f"02:00:0a:63:{index:02x}:01",
        "type",
        "veth",
        "peer",
        "name",
        MGMT_INTERFACE,
        "netns",
        ns,
        "address",
        f"02:00:0a:63:{index:02x}:02",
    )
    sh.run("ip", "addr", "add", f"{host_ip}/30", "dev", host_end)
    sh.run("ip", "link", "set", host_end, "up")
    sh.run("ip", "-n", ns, "addr", "add", f"{node_ip}/30", "dev", MGMT_INTERFACE)
    sh.run("ip", "-n", ns, "link", "set", MGMT_INTERFACE, "up")
    sh.run("ip", "-n", ns, "link", "set", "lo", "up")


def reset_data_links(node: str) -> None:
    """Mimic a power cycle of the NICs: the namespace (and old addresses on it) outlive a boot."""
    ns = netns(node)
    result = sh.run("ip", "-n", ns, "-o", "link", "show", check=False)
    for line in result.stdout.splitlines():
        name = line.split(":")[1].strip().split("@")[0]
        if name not in ("lo", MGMT_INTERFACE):
            sh.run("ip", "-n", ns, "addr", "flush", "dev", name, check=False)
            sh.run("ip", "-n", ns, "link", "set", name, "down", "mtu", "1500", check=False)


def destroy() -> None:
    """Remove every lab namespace; their veth pairs (and host ends) go with them."""
    for ns in lab_namespaces():
        sh.run("ip", "netns", "del", ns, check=False)
    links = sh.run("ip", "-o", "link", "show", check=False).stdout
    for line in links.splitlines():
        name = line.split(":")[1].strip().split("@")[0]
        if name.startswith(HOST_VETH_PREFIX):
            sh.run("ip", "link", "del", name, check=False)

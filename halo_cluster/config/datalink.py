"""The data link of a cluster.yml: its subnet, each node's address in it and each node's
interface, checked against the interconnect and the SSH hosts (the management network).

Addresses are assigned in order, the given ones checked first; the subnet is arithmetic, never a
list of its hosts.
"""

from __future__ import annotations

import ipaddress
import itertools
import re

from halo_cluster.config import rules
from halo_cluster.config.model import Problems
from halo_cluster.config.quoting import quote
from halo_cluster.config.schema import DEFAULT_SUBNETS

# thunderbolt-net links are point to point: one cable, one interface and one subnet per pair
THUNDERBOLT_NODES = 2
# a data subnet wider than a /8 routes a large share of the address space onto one cable
MIN_SUBNET_PREFIX = 8
# ranges a data link can never use: "this network", loopback, link-local, multicast and reserved
UNUSABLE = tuple(
    ipaddress.IPv4Network(n)
    for n in ("0.0.0.0/8", "127.0.0.0/8", "169.254.0.0/16", "224.0.0.0/4", "240.0.0.0/4")
)
# interface names that say which link they are: thunderbolt-net names its interfaces
# thunderbolt<N>; ice names E810 ports with a physical port suffix (enp194s0np0, ens1f0np0)
THUNDERBOLT_NAME = re.compile(r"thunderbolt\d*")
E810_LIKE_NAME = re.compile(r"en[a-z0-9]*np\d+")


def derive_subnet(doc: dict, interconnect: str, problems: Problems) -> ipaddress.IPv4Network | None:
    text = doc.get("subnet") or DEFAULT_SUBNETS[interconnect]
    try:
        subnet = ipaddress.IPv4Network(text)
    except ValueError:
        problems.error(
            "subnet",
            f"{quote(text)} is not an IPv4 network in CIDR form (address/prefix, host bits zero)",
        )
        return None
    if subnet.prefixlen > 30:
        problems.error("subnet", f"{subnet} holds no two host addresses; use a /30 or larger")
        return None
    if subnet.prefixlen < MIN_SUBNET_PREFIX:
        problems.error(
            "subnet",
            f"{subnet} is wider than a /{MIN_SUBNET_PREFIX}: it would route that much of the "
            "address space onto the data link; a /29 holds 6 nodes",
        )
        return None
    if clash := next((n for n in UNUSABLE if subnet.overlaps(n)), None):
        problems.error("subnet", f"{subnet} overlaps {clash}, which no data link can use")
        return None
    return subnet


def check_node_count(count: int, interconnect: str, problems: Problems) -> None:
    if interconnect == "thunderbolt" and count != THUNDERBOLT_NODES:
        problems.error(
            "nodes",
            f"{count} node{'s' if count != 1 else ''} on thunderbolt: a Thunderbolt link is one "
            "cable between exactly 2 nodes; use 2 nodes, or roce through a switch for more",
        )


def management_addresses(hosts: list[str]) -> dict[ipaddress.IPv4Address, int]:
    """The SSH hosts that are IPv4 addresses, each with the first node that uses it."""
    found: dict[ipaddress.IPv4Address, int] = {}
    for i, host in enumerate(hosts):
        try:
            found.setdefault(ipaddress.IPv4Address(host), i)
        except ValueError:
            continue  # a name or an IPv6 address: cannot be in an IPv4 data subnet
    return found


def check_subnet_apart(
    subnet: ipaddress.IPv4Network, management: dict[ipaddress.IPv4Address, int], problems: Problems
) -> None:
    """A data subnet holding a management address would add a second route to the management
    network through the data link (and the SSH session could move onto it)."""
    inside = [(a, i) for a, i in management.items() if a in subnet]
    if inside:
        address, i = inside[0]
        problems.error(
            "subnet",
            f"{subnet} contains {address}, the SSH host of nodes[{i}]: the data link needs a "
            "subnet of its own, apart from the management network",
        )


def derive_addresses(
    raws: list[dict],
    subnet: ipaddress.IPv4Network,
    management: dict[ipaddress.IPv4Address, int],
    problems: Problems,
) -> list[str]:
    """Given addresses checked, the others the subnet's first free host addresses: arithmetic on
    the subnet, never a list of its hosts (a /8 holds 16 million)."""
    capacity = subnet.num_addresses - 2  # prefix <= 30: network and broadcast are not hosts
    if len(raws) > capacity:
        problems.error(
            "nodes",
            f"{len(raws)} nodes do not fit in {subnet}, which holds "
            f"{capacity}; choose a larger subnet",
        )
    taken: dict[ipaddress.IPv4Address, str] = {}
    given: dict[int, str] = {}
    for i, raw in enumerate(raws):
        text = (raw.get("data") or {}).get("address")
        if text is None:
            continue
        at = f"nodes[{i}].data.address"
        problem, address = _address_problem(text, subnet, management)
        if problem or address is None:
            problems.error(at, problem or "")
        elif address in taken:
            problems.error(at, f"{address} is already the address of {taken[address]}")
        else:
            taken[address] = f"nodes[{i}]"
            given[i] = str(address)
    first = int(subnet.network_address) + 1
    hosts = (ipaddress.IPv4Address(first + k) for k in range(capacity))
    free = (str(a) for a in hosts if a not in taken and a not in management)
    wanted = len(raws) - len(given)
    chosen = list(itertools.islice(free, wanted))
    chosen += [""] * (wanted - len(chosen))
    fill = iter(chosen)
    return [given[i] if i in given else next(fill) for i in range(len(raws))]


def _address_problem(
    text: str, subnet: ipaddress.IPv4Network, management: dict[ipaddress.IPv4Address, int]
) -> tuple[str | None, ipaddress.IPv4Address | None]:
    try:
        address = ipaddress.IPv4Address(text)
    except ValueError:
        return f"{quote(text)} is not an IPv4 address", None
    if address not in subnet:
        return f"{text} is outside the subnet {subnet}", None
    if address == subnet.network_address:
        return f"{text} is the network address of {subnet}", None
    if address == subnet.broadcast_address:
        return f"{text} is the broadcast address of {subnet}", None
    if address in management:
        return f"{text} is the SSH host of nodes[{management[address]}]", None
    return None, address


def derive_interface(
    data: dict, interconnect: str, at: str, problems: Problems
) -> tuple[str | None, str | None]:
    interface, mac = data.get("interface"), data.get("mac")
    if mac is not None:
        if interface is not None:
            problems.error(f"{at}.mac", "give either `interface` or `mac`, not both")
        return None, mac.lower()
    if interface is None:
        interface = "auto" if interconnect == "roce" else "thunderbolt0"
    if interface == "auto" and interconnect != "roce":
        problems.error(f"{at}.interface", "`auto` finds an E810 port; it needs interconnect roce")
    elif interface != "auto" and (problem := rules.interface_name(interface)):
        problems.error(f"{at}.interface", problem)
    elif interconnect == "roce" and THUNDERBOLT_NAME.fullmatch(interface):
        problems.error(
            f"{at}.interface",
            f"{interface} is a Thunderbolt interface: RoCE needs an E810 port "
            "(or interconnect: thunderbolt)",
        )
    elif interconnect == "thunderbolt" and E810_LIKE_NAME.fullmatch(interface):
        problems.warn(
            f"{at}.interface",
            f"{interface} looks like an E810 port, not thunderbolt-net's thunderbolt0",
        )
    return interface, None

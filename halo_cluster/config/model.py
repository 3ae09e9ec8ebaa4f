"""The cluster model: every value the roles need, derived from a checked cluster.yml document.

`derive()` turns the document into a `Cluster` of `Node`s: addresses assigned in order, the head
chosen, SSH settings resolved; then each section's `Derivation`, declared by the role that owns
its keys, adds that role's typed values. What cannot be derived is reported through `Problems`,
one line per mistake, naming the file and the key.
"""

from __future__ import annotations

import ipaddress
import itertools
import re
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

from halo_cluster.config import rules
from halo_cluster.config.quoting import quote
from halo_cluster.config.schema import DEFAULT_SUBNETS, current, host_name

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


class ConfigError(Exception):
    """The configuration is invalid; `problems` holds one line per mistake."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = problems


class Problems:
    """Collects `FILE: KEY: what is wrong` lines, so the user sees every mistake in one run."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.lines: list[str] = []
        self.warnings: list[str] = []
        self.fatal = False  # a problem that makes deriving values impossible (type, missing key)

    def error(self, where: str, message: str, fatal: bool = False) -> None:
        self.fatal = self.fatal or fatal
        self.lines.append(f"{self.label}: {where + ': ' if where else ''}{message}")

    def warn(self, where: str, message: str) -> None:
        """A doubt that does not stop the run: printed by the loader."""
        self.warnings.append(f"{self.label}: {where + ': ' if where else ''}warning: {message}")

    def raise_if_any(self) -> None:
        if self.lines:
            raise ConfigError(self.lines)


@dataclass(frozen=True)
class Node:
    name: str
    role: str
    ssh_host: str
    ssh_port: int
    ssh_user: str
    ssh_key: str | None
    ssh_known_hosts: str | None
    interface: str | None  # name, "auto", or None when bound by MAC
    mac: str | None
    address: str


@dataclass(frozen=True)
class Cluster:
    """The whole cluster, every field set by `derive` (defaults are the schema's).

    A role's values are reached by their host data name without `halo_`: `cluster.NAME` is the
    dataclass section NAME derives, `cluster.NAME_FIELD` one of its fields, `cluster.KEY` a plain
    key (dots as `_`). The roles own those keys, so this class names none of them."""

    source: str
    interconnect: str
    subnet: ipaddress.IPv4Network
    cluster_user: str
    image: str
    toolbox: str
    max_latency_us: int
    min_bandwidth_gbps: int
    nodes: tuple[Node, ...]
    warnings: tuple[str, ...]
    # every plain key by its path, as written or the schema's default: a role's own key reaches
    # its host data from here, without a field or a derivation of its own
    settings: dict[str, Any]
    # each section's derived values by its name (`Derivation.derive`): a dataclass, or None
    derived: dict[str, Any]

    @property
    def head(self) -> Node:
        return next(n for n in self.nodes if n.role == "head")

    @property
    def workers(self) -> tuple[Node, ...]:
        return tuple(n for n in self.nodes if n.role == "worker")

    def values(self) -> dict[str, Any]:
        """Every role's value by its host data name: the plain keys, each replaced by what a
        section derives for it (a file name resolved, not as written)."""
        found = {host_name(path): value for path, value in self.settings.items()}
        for name, value in self.derived.items():
            if value is not None:
                found |= {
                    host_name(f"{name}.{f.name}"): getattr(value, f.name) for f in fields(value)
                }
        return found

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):  # copy and pickle probe an instance before its fields are set
            raise AttributeError(name)
        if name in self.derived:
            return self.derived[name]
        try:
            return self.values()[host_name(name)]
        except KeyError:
            raise AttributeError(f"{type(self).__name__} has no value {name!r}") from None


def _get(doc: dict, path: str) -> Any:
    """Value at a dotted path of the top-level document, or the schema default."""
    value: Any = doc
    for part in path.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return current().default(path) if value is None else value


def derive(doc: dict, problems: Problems, base_dir: Path) -> Cluster:
    """The cluster model from a document whose keys and types are already checked: the cluster
    section's values, then each section's derivation, in the roles' order."""
    interconnect = _get(doc, "interconnect")
    subnet = _derive_subnet(doc, interconnect, problems)
    for key in ("verify.max_latency_us", "verify.min_bandwidth_gbps"):
        if _get(doc, key) <= 0:
            problems.error(key, f"{_get(doc, key)} is not a positive number")
    nodes = _derive_nodes(doc, interconnect, subnet, problems, base_dir) if subnet else ()
    cluster = Cluster(
        source=problems.label,
        interconnect=interconnect,
        subnet=subnet or ipaddress.IPv4Network(DEFAULT_SUBNETS[interconnect]),
        cluster_user=_get(doc, "cluster_user"),
        image=_get(doc, "image"),
        toolbox=_get(doc, "toolbox"),
        max_latency_us=_get(doc, "verify.max_latency_us"),
        min_bandwidth_gbps=_get(doc, "verify.min_bandwidth_gbps"),
        nodes=nodes,
        warnings=(),
        settings=_settings(doc),
        derived={},
    )
    derived = {d.name: d.derive(cluster, problems, base_dir) for d in current().derivations}
    return replace(cluster, derived=derived, warnings=tuple(problems.warnings))


def _settings(doc: dict) -> dict[str, Any]:
    """Every plain key (the nodes, SSH, the mappings and the items of a list aside: a list of
    mappings is one value, its items' keys are not keys of the document) as written or
    defaulted."""
    return {
        f.path: _get(doc, f.path)
        for f in current().fields
        if f.type != "mapping" and not f.path.startswith(("nodes", "ssh")) and "[]" not in f.path
    }


def _derive_subnet(
    doc: dict, interconnect: str, problems: Problems
) -> ipaddress.IPv4Network | None:
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


def _node_ssh(doc: dict, raw: dict, key: str) -> Any:
    own = (raw.get("ssh") or {}).get(key)
    return own if own is not None else _get(doc, f"ssh.{key}")


def resolve(path: str | None, base_dir: Path) -> str | None:
    """A file named in cluster.yml, as an absolute path: relative to the config's folder."""
    if path is None:
        return None
    return str((base_dir / Path(path).expanduser()).resolve())


def _derive_nodes(
    doc: dict,
    interconnect: str,
    subnet: ipaddress.IPv4Network,
    problems: Problems,
    base_dir: Path,
) -> tuple[Node, ...]:
    raws: list[dict] = doc["nodes"]
    _check_node_count(len(raws), interconnect, problems)
    names = [(f"nodes[{i}].name", r["name"], r["name"].lower()) for i, r in enumerate(raws)]
    _check_unique(problems, names, "name")
    hosts = [rules.normal_host(r["ssh"]["host"]) for r in raws]
    at_hosts = [(f"nodes[{i}].ssh.host", r["ssh"]["host"], hosts[i]) for i, r in enumerate(raws)]
    _check_unique(problems, at_hosts, "SSH host")
    roles = _derive_roles(raws, problems)
    management = _management_addresses(hosts)
    _check_subnet_apart(subnet, management, problems)
    addresses = _derive_addresses(raws, subnet, management, problems)
    nodes = []
    for i, raw in enumerate(raws):
        at = f"nodes[{i}].data"
        interface, mac = _derive_interface((raw.get("data") or {}), interconnect, at, problems)
        nodes.append(
            Node(
                name=raw["name"],
                role=roles[i],
                ssh_host=hosts[i],
                ssh_port=_node_ssh(doc, raw, "port"),
                ssh_user=_node_ssh(doc, raw, "user"),
                ssh_key=resolve(_node_ssh(doc, raw, "key"), base_dir),
                ssh_known_hosts=resolve(_node_ssh(doc, raw, "known_hosts"), base_dir),
                interface=interface,
                mac=mac,
                address=addresses[i],
            )
        )
    macs = [(f"nodes[{i}].data.mac", n.mac, n.mac) for i, n in enumerate(nodes) if n.mac]
    _check_unique(problems, macs, "MAC")
    return tuple(nodes)


def _check_node_count(count: int, interconnect: str, problems: Problems) -> None:
    if interconnect == "thunderbolt" and count != THUNDERBOLT_NODES:
        problems.error(
            "nodes",
            f"{count} node{'s' if count != 1 else ''} on thunderbolt: a Thunderbolt link is one "
            "cable between exactly 2 nodes; use 2 nodes, or roce through a switch for more",
        )


def _check_unique(problems: Problems, values: list[tuple[str, str, str]], what: str) -> None:
    """(where, as written, as compared): the second of two equal values is refused."""
    first: dict[str, tuple[str, str]] = {}
    for at, written, same in values:
        if same in first:
            node, other = first[same]
            also = f" ({other})" if other != written else ""
            problems.error(at, f"{what} {quote(written)} is already used by {node}{also}")
        else:
            first[same] = (at.split(".")[0], written)


def _management_addresses(hosts: list[str]) -> dict[ipaddress.IPv4Address, int]:
    """The SSH hosts that are IPv4 addresses, each with the first node that uses it."""
    found: dict[ipaddress.IPv4Address, int] = {}
    for i, host in enumerate(hosts):
        try:
            found.setdefault(ipaddress.IPv4Address(host), i)
        except ValueError:
            continue  # a name or an IPv6 address: cannot be in an IPv4 data subnet
    return found


def _check_subnet_apart(
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


def _derive_roles(raws: list[dict], problems: Problems) -> list[str]:
    given = [raw.get("role") for raw in raws]
    heads = [i for i, role in enumerate(given) if role == "head"]
    if len(heads) > 1:
        problems.error(f"nodes[{heads[1]}].role", f"a second head (nodes[{heads[0]}] is the head)")
    head = heads[0] if heads else next((i for i, r in enumerate(given) if r is None), None)
    if head is None:
        problems.error("nodes", "no node can be the head: every node says `role: worker`")
    return ["head" if i == head else "worker" for i in range(len(raws))]


def _derive_addresses(
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


def _derive_interface(
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

"""Load cluster.yml, validate it against the schema and derive every value the roles need.

`load_cluster(path)` is the one entry point: inventory.py, the testinfra conftest and the lab all
use it. Problems are collected, not raised one by one, so the user sees every mistake in one run;
each is a single line `FILE: KEY.PATH: what is wrong`.
"""

from __future__ import annotations

import ipaddress
import re
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from halo_cluster.schema import (
    DEFAULT_SUBNETS,
    DERIVED,
    FIELDS,
    MTU_RANGES,
    REQUIRED,
    children_of,
)

MAC_RE = re.compile(r"^[0-9a-fA-F]{2}(:[0-9a-fA-F]{2}){5}$")
NM_CONNECTION_ID = "halo-data"
BASE_PACKAGES = ("rdma-core", "libibverbs-utils", "perftest", "ethtool", "iproute")
CONTAINER_PACKAGES = ("podman", "toolbox")


class ConfigError(Exception):
    """The configuration is invalid; `problems` holds one line per mistake."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = problems


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
    source: str
    interconnect: str
    subnet: ipaddress.IPv4Network
    mtu: int
    cluster_user: str
    reboot: str
    image: str
    image_update: bool
    toolbox: str
    kernel_args: tuple[str, ...]
    kernel_args_remove: tuple[str, ...]
    max_latency_us: int = 10
    min_bandwidth_gbps: int = 40
    nodes: tuple[Node, ...] = field(default_factory=tuple)

    @property
    def head(self) -> Node:
        return next(n for n in self.nodes if n.role == "head")

    @property
    def workers(self) -> tuple[Node, ...]:
        return tuple(n for n in self.nodes if n.role == "worker")


def gtt_kernel_args(gtt_gib: int) -> tuple[str, str]:
    """GTT size in GiB -> (amdgpu.gttsize in MiB, ttm.pages_limit in 4 KiB pages)."""
    mib = gtt_gib * 1024
    return f"amdgpu.gttsize={mib}", f"ttm.pages_limit={mib * 256}"


def load_cluster(path: str | Path) -> Cluster:
    """Read, validate and derive; raises ConfigError with every problem found."""
    path = Path(path)
    label = str(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConfigError([f"{label}: cannot read: {exc.strerror}"]) from None
    raw = _parse_yaml(text, label)
    return parse_cluster(raw, label, base_dir=path.parent)


def parse_cluster(raw: Any, label: str = "cluster.yml", base_dir: Path | None = None) -> Cluster:
    checker = _Checker(label)
    doc = checker.mapping(raw, "")
    if doc is None:
        raise ConfigError(checker.problems)
    checker.walk(doc, "", "")
    if checker.fatal:
        raise ConfigError(checker.problems)
    cluster = _derive(doc, checker, base_dir or Path.cwd())
    if checker.problems:
        raise ConfigError(checker.problems)
    return cluster


class _UniqueKeyLoader(yaml.SafeLoader):
    """SafeLoader that refuses a key given twice in one mapping (PyYAML keeps the last silently)."""


def _construct_mapping(loader: _UniqueKeyLoader, node: yaml.MappingNode) -> dict:
    seen: set = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r}", key_node.start_mark
            )
        seen.add(key)
    return loader.construct_mapping(node)


_UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def _parse_yaml(text: str, label: str) -> Any:
    try:
        return yaml.load(text, Loader=_UniqueKeyLoader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "?"
        raise ConfigError([f"{label}: {where}: YAML error: {exc.problem}"]) from None
    except yaml.YAMLError as exc:
        raise ConfigError([f"{label}: YAML error: {exc}"]) from None


class _Checker:
    """Type and key checks driven by the schema table; collects problems."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.problems: list[str] = []
        self.fatal = False  # a problem that makes deriving values impossible (type, missing key)

    def error(self, where: str, message: str, fatal: bool = False) -> None:
        self.fatal = self.fatal or fatal
        self.problems.append(f"{self.label}: {where + ': ' if where else ''}{message}")

    def mapping(self, value: Any, where: str) -> dict | None:
        if value is None and not where:
            self.error("", "the file is empty", fatal=True)
            return None
        if not isinstance(value, dict):
            self.error(where, f"expected a mapping, got {_type_name(value)}", fatal=True)
            return None
        return value

    def walk(self, doc: dict, schema_prefix: str, where: str) -> None:
        fields = children_of(schema_prefix)
        for key in doc:
            if key not in fields:
                known = ", ".join(sorted(fields))
                self.error(_join(where, str(key)), f"unknown key (known keys: {known})")
        for key, spec in fields.items():
            at = _join(where, key)
            if key not in doc or doc[key] is None:
                if spec.default is REQUIRED:
                    self.error(at, "required key is missing", fatal=True)
                continue
            if spec.choices and isinstance(doc[key], bool):
                # YAML 1.1 reads a bare `off`/`on` as a boolean; the user meant the word
                doc[key] = "on" if doc[key] else "off"
            value = doc[key]
            if not self._type_ok(value, spec.type, at):
                continue
            if spec.choices and value not in spec.choices:
                self.error(at, f"{value!r} is not one of: {', '.join(spec.choices)}", fatal=True)
            if spec.type == "mapping":
                self.walk(value, spec.path, at)
            elif spec.type == "list of mappings":
                if not value:
                    self.error(at, "must list at least one entry", fatal=True)
                for i, item in enumerate(value):
                    if self.mapping(item, f"{at}[{i}]") is not None:
                        self.walk(item, spec.path + "[]", f"{at}[{i}]")

    def _type_ok(self, value: Any, type_name: str, at: str) -> bool:
        ok = {
            "string": isinstance(value, str) and value != "",
            "integer": isinstance(value, int) and not isinstance(value, bool),
            "boolean": isinstance(value, bool),
            "mapping": isinstance(value, dict),
            "list of mappings": isinstance(value, list),
            "list of strings": isinstance(value, list) and all(isinstance(v, str) for v in value),
        }[type_name]
        if not ok:
            self.error(at, f"expected {type_name}, got {_type_name(value)} {value!r}", fatal=True)
        return ok


def _join(where: str, key: str) -> str:
    return f"{where}.{key}" if where else key


def _type_name(value: Any) -> str:
    names = {
        bool: "boolean",
        int: "integer",
        float: "number",
        str: "string",
        list: "list",
        dict: "mapping",
        type(None): "nothing",
    }
    return names.get(type(value), type(value).__name__)


def _get(doc: dict, path: str) -> Any:
    """Value at a dotted path of the top-level document, or the schema default."""
    value: Any = doc
    for part in path.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    if value is None:
        default = FIELDS[path].default
        return None if default in (REQUIRED, DERIVED) else default
    return value


def _derive(doc: dict, checker: _Checker, base_dir: Path) -> Cluster:
    interconnect = _get(doc, "interconnect")
    subnet = _derive_subnet(doc, interconnect, checker)
    mtu = _get(doc, "mtu")
    low, high = MTU_RANGES[interconnect]
    if not low <= mtu <= high:
        checker.error("mtu", f"{mtu} is outside {low}-{high}, the range {interconnect} allows")
    wanted, remove = _derive_kernel_args(doc, checker)
    for key in ("verify.max_latency_us", "verify.min_bandwidth_gbps"):
        if _get(doc, key) <= 0:
            checker.error(key, f"{_get(doc, key)} is not a positive number")
    nodes = _derive_nodes(doc, interconnect, subnet, checker, base_dir) if subnet else ()
    return Cluster(
        source=checker.label,
        interconnect=interconnect,
        subnet=subnet or ipaddress.IPv4Network(DEFAULT_SUBNETS[interconnect]),
        mtu=mtu,
        cluster_user=_get(doc, "cluster_user"),
        reboot=_get(doc, "reboot"),
        image=_get(doc, "image"),
        image_update=_get(doc, "image_update"),
        toolbox=_get(doc, "toolbox"),
        kernel_args=wanted,
        kernel_args_remove=remove,
        max_latency_us=_get(doc, "verify.max_latency_us"),
        min_bandwidth_gbps=_get(doc, "verify.min_bandwidth_gbps"),
        nodes=nodes,
    )


def _derive_subnet(doc: dict, interconnect: str, checker: _Checker) -> ipaddress.IPv4Network | None:
    text = doc.get("subnet") or DEFAULT_SUBNETS[interconnect]
    try:
        subnet = ipaddress.IPv4Network(text)
    except ValueError as exc:
        checker.error("subnet", f"{text!r} is not an IPv4 network in CIDR form ({exc})")
        return None
    if subnet.prefixlen > 30:
        checker.error("subnet", f"{subnet} holds no two host addresses; use a /30 or larger")
        return None
    return subnet


def _derive_kernel_args(doc: dict, checker: _Checker) -> tuple[tuple[str, ...], tuple[str, ...]]:
    gtt = _get(doc, "kernel.gtt_gib")
    if gtt <= 0:
        checker.error("kernel.gtt_gib", f"{gtt} is not a positive whole number of GiB")
    iommu_pt = _get(doc, "kernel.iommu") == "pt"
    wanted: list[str] = ["iommu=pt" if iommu_pt else "amd_iommu=off"]
    remove: list[str] = ["amd_iommu=off" if iommu_pt else "iommu=pt"]
    toggles = {"kernel.pci_realloc": "pci=realloc", "kernel.pcie_aspm_off": "pcie_aspm=off"}
    for key, arg in toggles.items():
        (wanted if _get(doc, key) else remove).append(arg)
    wanted.extend(gtt_kernel_args(gtt))
    for i, arg in enumerate(_get(doc, "kernel.extra_args")):
        if not arg or any(c.isspace() for c in arg) or arg.startswith("="):
            checker.error(f"kernel.extra_args[{i}]", f"{arg!r} is not a single kernel argument")
        else:
            wanted.append(arg)
    for i, arg in enumerate(_get(doc, "kernel.remove_args")):
        if not arg or any(c.isspace() for c in arg):
            checker.error(f"kernel.remove_args[{i}]", f"{arg!r} is not a single kernel argument")
        elif arg in wanted:
            checker.error(f"kernel.remove_args[{i}]", f"{arg!r} is also an argument to add")
        else:
            remove.append(arg)
    return tuple(wanted), tuple(remove)


def _node_ssh(doc: dict, raw: dict, key: str) -> Any:
    own = raw.get("ssh", {}).get(key)
    return own if own is not None else _get(doc, f"ssh.{key}")


def _resolve(path: str | None, base_dir: Path) -> str | None:
    if path is None:
        return None
    return str((base_dir / Path(path).expanduser()).resolve())


def _derive_nodes(
    doc: dict,
    interconnect: str,
    subnet: ipaddress.IPv4Network,
    checker: _Checker,
    base_dir: Path,
) -> tuple[Node, ...]:
    raws: list[dict] = doc["nodes"]
    _check_unique(checker, [(f"nodes[{i}].name", r["name"]) for i, r in enumerate(raws)], "name")
    hosts = [
        (f"nodes[{i}].ssh.host", r["ssh"]["host"], _node_ssh(doc, r, "port"))
        for i, r in enumerate(raws)
    ]
    _check_unique(checker, [(at, f"{h}:{p}") for at, h, p in hosts], "SSH address")
    roles = _derive_roles(raws, checker)
    addresses = _derive_addresses(raws, subnet, checker)
    nodes = []
    for i, raw in enumerate(raws):
        at = f"nodes[{i}].data"
        interface, mac = _derive_interface(raw.get("data", {}), interconnect, at, checker)
        nodes.append(
            Node(
                name=raw["name"],
                role=roles[i],
                ssh_host=raw["ssh"]["host"],
                ssh_port=_node_ssh(doc, raw, "port"),
                ssh_user=_node_ssh(doc, raw, "user"),
                ssh_key=_resolve(_node_ssh(doc, raw, "key"), base_dir),
                ssh_known_hosts=_resolve(_node_ssh(doc, raw, "known_hosts"), base_dir),
                interface=interface,
                mac=mac,
                address=addresses[i],
            )
        )
    return tuple(nodes)


def _check_unique(checker: _Checker, values: list[tuple[str, str]], what: str) -> None:
    first: dict[str, str] = {}
    for at, value in values:
        if value in first:
            checker.error(at, f"{what} {value!r} is already used by {first[value]}")
        else:
            first[value] = at.split(".")[0]


def _derive_roles(raws: list[dict], checker: _Checker) -> list[str]:
    given = [raw.get("role") for raw in raws]
    heads = [i for i, role in enumerate(given) if role == "head"]
    if len(heads) > 1:
        checker.error(f"nodes[{heads[1]}].role", f"a second head (nodes[{heads[0]}] is the head)")
    head = heads[0] if heads else next((i for i, r in enumerate(given) if r is None), None)
    if head is None:
        checker.error("nodes", "no node can be the head: every node says `role: worker`")
    return ["head" if i == head else "worker" for i in range(len(raws))]


def _derive_addresses(
    raws: list[dict], subnet: ipaddress.IPv4Network, checker: _Checker
) -> list[str]:
    hosts = list(subnet.hosts())
    if len(raws) > len(hosts):
        checker.error(
            "nodes",
            f"{len(raws)} nodes do not fit in {subnet}, which holds "
            f"{len(hosts)}; choose a larger subnet",
        )
    taken: dict[str, str] = {}
    given: dict[int, str] = {}
    for i, raw in enumerate(raws):
        text = raw.get("data", {}).get("address")
        if text is None:
            continue
        at = f"nodes[{i}].data.address"
        problem = _address_problem(text, subnet)
        if problem:
            checker.error(at, problem)
        elif text in taken:
            checker.error(at, f"{text} is already the address of {taken[text]}")
        else:
            taken[text] = f"nodes[{i}]"
            given[i] = text
    free = (str(h) for h in hosts if str(h) not in taken)
    return [given[i] if i in given else next(free, "") for i in range(len(raws))]


def _address_problem(text: str, subnet: ipaddress.IPv4Network) -> str | None:
    try:
        address = ipaddress.IPv4Address(text)
    except ValueError:
        return f"{text!r} is not an IPv4 address"
    if address not in subnet:
        return f"{text} is outside the subnet {subnet}"
    if address == subnet.network_address:
        return f"{text} is the network address of {subnet}"
    if address == subnet.broadcast_address:
        return f"{text} is the broadcast address of {subnet}"
    return None


def _derive_interface(
    data: dict, interconnect: str, at: str, checker: _Checker
) -> tuple[str | None, str | None]:
    interface, mac = data.get("interface"), data.get("mac")
    if mac is not None:
        if interface is not None:
            checker.error(f"{at}.mac", "give either `interface` or `mac`, not both")
        if not MAC_RE.match(mac):
            checker.error(f"{at}.mac", f"{mac!r} is not a MAC address (aa:bb:cc:dd:ee:ff)")
        return None, mac.lower()
    if interface is None:
        interface = "auto" if interconnect == "roce" else "thunderbolt0"
    if interface == "auto" and interconnect != "roce":
        checker.error(f"{at}.interface", "`auto` finds an E810 port; it needs interconnect roce")
    elif not re.fullmatch(r"[A-Za-z0-9_.:-]{1,15}", interface):
        checker.error(f"{at}.interface", f"{interface!r} is not a valid interface name")
    return interface, None


def host_data(cluster: Cluster, node: Node) -> dict[str, Any]:
    """Everything a role needs about one node, as pyinfra host data (JSON-friendly)."""
    peers = [n for n in cluster.nodes if n.name != node.name]
    data: dict[str, Any] = {
        "ssh_hostname": node.ssh_host,
        "ssh_port": node.ssh_port,
        "ssh_user": node.ssh_user,
        "halo_node": node.name,
        "halo_role": node.role,
        "halo_interconnect": cluster.interconnect,
        "halo_mtu": cluster.mtu,
        "halo_data_interface": node.interface,
        "halo_data_mac": node.mac,
        "halo_data_address": node.address,
        "halo_data_prefix": cluster.subnet.prefixlen,
        "halo_subnet": str(cluster.subnet),
        "halo_nm_connection": NM_CONNECTION_ID,
        "halo_nm_uuid": str(uuid.uuid5(uuid.NAMESPACE_URL, f"halo-cluster:{node.name}:data")),
        "halo_peers": {p.name: p.address for p in peers},
        "halo_head_address": cluster.head.address,
        "halo_worker_addresses": [w.address for w in cluster.workers],
        "halo_kernel_args": list(cluster.kernel_args),
        "halo_kernel_args_remove": list(cluster.kernel_args_remove),
        "halo_reboot": cluster.reboot,
        "halo_packages": list(BASE_PACKAGES + CONTAINER_PACKAGES),
        "halo_cluster_user": cluster.cluster_user,
        "halo_image": cluster.image,
        "halo_image_update": cluster.image_update,
        "halo_toolbox": cluster.toolbox,
    }
    if node.ssh_key:
        data["ssh_key"] = node.ssh_key
    if node.ssh_known_hosts:
        data["ssh_known_hosts_file"] = node.ssh_known_hosts
        data["ssh_strict_host_key_checking"] = "yes"
    return data


def inventory_groups(cluster: Cluster) -> dict[str, list[tuple[str, dict[str, Any]]]]:
    """pyinfra inventory groups: `head` and `workers`, each a list of (name, host data)."""
    return {
        "head": [(cluster.head.name, host_data(cluster, cluster.head))],
        "workers": [(n.name, host_data(cluster, n)) for n in cluster.workers],
    }

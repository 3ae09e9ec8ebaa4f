"""The cluster model: every value the roles need, derived from a checked cluster.yml document.

`derive()` turns the document into a `Cluster` of `Node`s: addresses assigned in order, the head
chosen, kernel arguments computed, SSH settings resolved. What cannot be derived is reported
through `Problems`, one line per mistake, naming the file and the key.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from halo_cluster import rules
from halo_cluster.schema import DEFAULT_SUBNETS, DERIVED, FIELDS, MTU_RANGES, REQUIRED

NM_CONNECTION_ID = "halo-data"
# Ray's cluster token when `serve.ray_token_file` is not given: made once by the loader
DEFAULT_RAY_TOKEN = ".halo-cluster/ray-token"
# thunderbolt-net links are point to point: one cable, one interface and one subnet per pair
MAX_THUNDERBOLT_NODES = 2


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
        self.fatal = False  # a problem that makes deriving values impossible (type, missing key)

    def error(self, where: str, message: str, fatal: bool = False) -> None:
        self.fatal = self.fatal or fatal
        self.lines.append(f"{self.label}: {where + ': ' if where else ''}{message}")

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
class Serve:
    """The `serve:` section: Ray on every node, `vllm serve` on the head (docs/roles/serve.md)."""

    enabled: bool = False
    model: str | None = None
    served_model_name: str | None = None
    tensor_parallel_size: int = 1
    pipeline_parallel_size: int = 1
    port: int = 8000
    listen: str = "data"
    api_key_file: str | None = None
    hf_token_file: str | None = None
    ray_token_file: str | None = None
    gpu_memory_utilization: float = 0.9
    max_model_len: int | None = None
    max_num_seqs: int | None = None
    enforce_eager: bool = True
    extra_args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    ready_timeout: int = 1800
    wait: bool = True
    nccl_debug: bool = False
    download: bool = False
    object_store_mib: int | None = None

    @property
    def gpus(self) -> int:
        return self.tensor_parallel_size * self.pipeline_parallel_size


@dataclass(frozen=True)
class Cluster:
    source: str
    interconnect: str
    subnet: ipaddress.IPv4Network
    mtu: int
    cluster_user: str
    reboot: str
    reboot_timeout: int
    image: str
    image_update: bool
    toolbox: str
    gtt_gib: int
    kernel_args: tuple[str, ...]
    kernel_args_remove: tuple[str, ...]
    max_latency_us: int = 10
    min_bandwidth_gbps: int = 40
    nodes: tuple[Node, ...] = field(default_factory=tuple)
    serve: Serve = field(default_factory=Serve)

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


def _get(doc: dict, path: str) -> Any:
    """Value at a dotted path of the top-level document, or the schema default."""
    value: Any = doc
    for part in path.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    if value is None:
        default = FIELDS[path].default
        return None if default in (REQUIRED, DERIVED) else default
    return value


def derive(doc: dict, problems: Problems, base_dir: Path) -> Cluster:
    """The cluster model from a document whose keys and types are already checked."""
    interconnect = _get(doc, "interconnect")
    subnet = _derive_subnet(doc, interconnect, problems)
    mtu = _get(doc, "mtu")
    low, high = MTU_RANGES[interconnect]
    if not low <= mtu <= high:
        problems.error("mtu", f"{mtu} is outside {low}-{high}, the range {interconnect} allows")
    wanted, remove = _derive_kernel_args(doc, problems)
    for key in ("verify.max_latency_us", "verify.min_bandwidth_gbps"):
        if _get(doc, key) <= 0:
            problems.error(key, f"{_get(doc, key)} is not a positive number")
    nodes = _derive_nodes(doc, interconnect, subnet, problems, base_dir) if subnet else ()
    return Cluster(
        source=problems.label,
        interconnect=interconnect,
        subnet=subnet or ipaddress.IPv4Network(DEFAULT_SUBNETS[interconnect]),
        mtu=mtu,
        cluster_user=_get(doc, "cluster_user"),
        reboot=_get(doc, "reboot"),
        reboot_timeout=_get(doc, "reboot_timeout"),
        image=_get(doc, "image"),
        image_update=_get(doc, "image_update"),
        toolbox=_get(doc, "toolbox"),
        gtt_gib=_get(doc, "kernel.gtt_gib"),
        kernel_args=wanted,
        kernel_args_remove=remove,
        max_latency_us=_get(doc, "verify.max_latency_us"),
        min_bandwidth_gbps=_get(doc, "verify.min_bandwidth_gbps"),
        nodes=nodes,
        serve=_derive_serve(doc, len(nodes), problems, base_dir),
    )


def _derive_serve(doc: dict, node_count: int, problems: Problems, base_dir: Path) -> Serve:
    values = {
        name: _get(doc, f"serve.{name}")
        for name in Serve.__dataclass_fields__
        if name not in ("tensor_parallel_size", "extra_args", "env")
    }
    tp = _get(doc, "serve.tensor_parallel_size") or node_count
    serve = Serve(
        **{**values, "api_key_file": None, "hf_token_file": None, "ray_token_file": None},
        tensor_parallel_size=tp,
        extra_args=tuple(_get(doc, "serve.extra_args")),
        env=dict(_get(doc, "serve.env")),
    )
    serve = replace(
        serve,
        api_key_file=_resolve(values["api_key_file"], base_dir),
        hf_token_file=_resolve(values["hf_token_file"], base_dir),
        ray_token_file=_resolve(values["ray_token_file"] or DEFAULT_RAY_TOKEN, base_dir),
        served_model_name=values["served_model_name"] or values["model"],
    )
    if not serve.enabled:
        return serve
    if not serve.model:
        problems.error("serve.model", "required when serve.enabled is true")
    if serve.gpus != node_count:
        problems.error(
            "serve.tensor_parallel_size",
            f"TP {tp} x PP {serve.pipeline_parallel_size} = {serve.gpus} GPUs, but the cluster "
            f"has {node_count} nodes with one GPU each: TP x PP must equal the number of nodes",
        )
    if serve.listen == "all" and not serve.api_key_file:
        problems.error("serve.api_key_file", "required with serve.listen: all (every address)")
    return serve


def _derive_subnet(
    doc: dict, interconnect: str, problems: Problems
) -> ipaddress.IPv4Network | None:
    text = doc.get("subnet") or DEFAULT_SUBNETS[interconnect]
    try:
        subnet = ipaddress.IPv4Network(text)
    except ValueError as exc:
        problems.error("subnet", f"{text!r} is not an IPv4 network in CIDR form ({exc})")
        return None
    if subnet.prefixlen > 30:
        problems.error("subnet", f"{subnet} holds no two host addresses; use a /30 or larger")
        return None
    return subnet


def _derive_kernel_args(doc: dict, problems: Problems) -> tuple[tuple[str, ...], tuple[str, ...]]:
    iommu_pt = _get(doc, "kernel.iommu") == "pt"
    wanted: list[str] = ["iommu=pt" if iommu_pt else "amd_iommu=off"]
    remove: list[str] = ["amd_iommu=off" if iommu_pt else "iommu=pt"]
    toggles = {"kernel.pci_realloc": "pci=realloc", "kernel.pcie_aspm_off": "pcie_aspm=off"}
    for key, arg in toggles.items():
        (wanted if _get(doc, key) else remove).append(arg)
    wanted.extend(gtt_kernel_args(_get(doc, "kernel.gtt_gib")))
    # each argument passed its rule in the loader: one token, no quotes
    wanted.extend(_get(doc, "kernel.extra_args"))
    for i, arg in enumerate(_get(doc, "kernel.remove_args")):
        if arg in wanted:
            problems.error(f"kernel.remove_args[{i}]", f"{arg!r} is also an argument to add")
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
    problems: Problems,
    base_dir: Path,
) -> tuple[Node, ...]:
    raws: list[dict] = doc["nodes"]
    if interconnect == "thunderbolt" and len(raws) > MAX_THUNDERBOLT_NODES:
        problems.error(
            "nodes",
            f"{len(raws)} nodes on thunderbolt: Thunderbolt links are point to point (one cable, "
            "port and subnet per pair); use at most 2 nodes, or roce through a switch",
        )
    _check_unique(problems, [(f"nodes[{i}].name", r["name"]) for i, r in enumerate(raws)], "name")
    hosts = [
        (f"nodes[{i}].ssh.host", r["ssh"]["host"], _node_ssh(doc, r, "port"))
        for i, r in enumerate(raws)
    ]
    _check_unique(problems, [(at, f"{h}:{p}") for at, h, p in hosts], "SSH address")
    roles = _derive_roles(raws, problems)
    addresses = _derive_addresses(raws, subnet, problems)
    nodes = []
    for i, raw in enumerate(raws):
        at = f"nodes[{i}].data"
        interface, mac = _derive_interface(raw.get("data", {}), interconnect, at, problems)
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


def _check_unique(problems: Problems, values: list[tuple[str, str]], what: str) -> None:
    first: dict[str, str] = {}
    for at, value in values:
        if value in first:
            problems.error(at, f"{what} {value!r} is already used by {first[value]}")
        else:
            first[value] = at.split(".")[0]


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
    raws: list[dict], subnet: ipaddress.IPv4Network, problems: Problems
) -> list[str]:
    hosts = list(subnet.hosts())
    if len(raws) > len(hosts):
        problems.error(
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
            problems.error(at, problem)
        elif text in taken:
            problems.error(at, f"{text} is already the address of {taken[text]}")
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
    return interface, None

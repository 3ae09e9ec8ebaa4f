"""The cluster model derived from a checked cluster.yml document.

`derive()` turns the document into a `Cluster` of `Node`s: the head chosen, the per-node SSH
settings resolved, each node's data address and interface (`datalink.py`); then each section's
`Derivation`, declared by the role that owns its keys, adds that role's typed values. What cannot
be derived is reported through `Problems`, one line per mistake, naming the file and the key.
"""

from __future__ import annotations

import ipaddress
from dataclasses import replace
from pathlib import Path
from typing import Any

from halo_cluster.config import datalink, rules
from halo_cluster.config.model import Cluster, Node, Problems
from halo_cluster.config.quoting import quote
from halo_cluster.config.schema import DEFAULT_SUBNETS, current


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
    subnet = datalink.derive_subnet(doc, interconnect, problems)
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
    datalink.check_node_count(len(raws), interconnect, problems)
    names = [(f"nodes[{i}].name", r["name"], r["name"].lower()) for i, r in enumerate(raws)]
    _check_unique(problems, names, "name")
    hosts = [rules.normal_host(r["ssh"]["host"]) for r in raws]
    at_hosts = [(f"nodes[{i}].ssh.host", r["ssh"]["host"], hosts[i]) for i, r in enumerate(raws)]
    _check_unique(problems, at_hosts, "SSH host")
    roles = _derive_roles(raws, problems)
    management = datalink.management_addresses(hosts)
    datalink.check_subnet_apart(subnet, management, problems)
    addresses = datalink.derive_addresses(raws, subnet, management, problems)
    nodes = []
    for i, raw in enumerate(raws):
        at = f"nodes[{i}].data"
        interface, mac = datalink.derive_interface(
            (raw.get("data") or {}), interconnect, at, problems
        )
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


def _derive_roles(raws: list[dict], problems: Problems) -> list[str]:
    given = [raw.get("role") for raw in raws]
    heads = [i for i, role in enumerate(given) if role == "head"]
    if len(heads) > 1:
        problems.error(f"nodes[{heads[1]}].role", f"a second head (nodes[{heads[0]}] is the head)")
    head = heads[0] if heads else next((i for i, r in enumerate(given) if r is None), None)
    if head is None:
        problems.error("nodes", "no node can be the head: every node says `role: worker`")
    return ["head" if i == head else "worker" for i in range(len(raws))]

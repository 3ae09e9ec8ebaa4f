"""`halo-cluster status` with `serve.launcher: native`: no Ray to read; which rank runs where. Every
node runs one `halo-vllm` (the head rank 0 with the API, the workers ranks 1.. headless in the
order of `nodes`, as roles/serve/flags.py numbers them), and the head shows its world as the
deploy's identity check reads it (node/vllmworld.py): the world size its executor reports and the
nodes whose ranks hold its master port. A node's rank is `in the world` when its address is
among those; the cluster is up when the world is TP x PP and every node is in it."""

from __future__ import annotations

from halo_cluster.config.model import Cluster, Node
from halo_cluster.node import batch
from halo_cluster.node import vllmworld as world

VLLM = "halo-vllm"


def native(cluster: Cluster) -> bool:
    return cluster.serve.launcher == "native"


def services(cluster: Cluster, node: Node) -> tuple[str, ...]:
    """The services a node runs: with Ray, Ray everywhere and vLLM on the head; native, a rank
    on every node."""
    if native(cluster):
        return (VLLM,)
    return ("halo-ray", VLLM) if node.role == "head" else ("halo-ray",)


def ranks(cluster: Cluster) -> dict[str, int]:
    """Each node's rank: the head's 0, the workers 1.. in the order of `nodes`."""
    return {cluster.head.name: 0} | {w.name: i for i, w in enumerate(cluster.workers, 1)}


def head_commands(cluster: Cluster) -> dict[str, str]:
    """What the head is asked of its world (instead of Ray's nodes)."""
    serve = cluster.serve
    return {
        "world": world.leader_command(cluster.cluster_user),
        "peers": world.peers_command(serve.master_port),
    }


def head_world(found: dict[str, batch.Part]) -> dict:
    """The head's world from its read: the size its executor reports, the ranks' nodes."""
    size = world.world_size("\n".join(found["world"].filled))
    return {"size": size, "nodes": world.store_peers(found["peers"].filled)}


def place(cluster: Cluster, statuses: list) -> None:
    """On the whole config (`cluster`: the ranks count every node, also those --limit or
    --exclude left unread), each read node's rank, whether it serves the API, and whether the
    head's world holds it (`unknown` when the head was not read); no Ray (`ray: none`), its GPUs
    the rank's share of TP x PP while it is in the world."""
    head = next((s for s in statuses if s.role == "head" and s.reachable), None)
    joined = head.vllm.get("world", {}).get("nodes", []) if head else None
    numbers, share = ranks(cluster), cluster.serve.gpus // cluster.serve.nnodes
    for status in statuses:
        inside = "unknown" if joined is None else status.address in joined
        status.rank = {"rank": numbers[status.name], "api": status.role == "head",
                       "in_world": inside}  # fmt: skip
        status.ray = "none"
        status.gpus = share if inside is True else 0 if inside is False else status.gpus


def whole(cluster: Cluster, statuses: list) -> bool:
    """The head's world is TP x PP and every node's rank is in it."""
    head = next((s for s in statuses if s.role == "head"), None)
    if head is None:  # left out: the world is read there, not judged
        return True
    size = head.vllm.get("world", {}).get("size")
    return size == cluster.serve.gpus and all(s.rank.get("in_world") is True for s in statuses)


def cell(status) -> str:
    """`0 API, in the world`, `1 headless, not in the world`."""
    found = status.rank
    if not found:
        return "?"
    what = "API" if found["api"] else "headless"
    where = {True: "in the world", False: "not in the world"}.get(found["in_world"], "unknown")
    return f"{found['rank']} {what}, {where}"


def world_line(cluster: Cluster, statuses: list) -> str:
    """The head's world in one line, beside the table ("" when the head was not read)."""
    head = next((s for s in statuses if s.role == "head" and s.reachable), None)
    if head is None:
        return ""
    found = head.vllm.get("world", {})
    size = found.get("size")
    said = f"world size {size}" if size is not None else "no world size in the head's log"
    nodes = " ".join(found.get("nodes", [])) or "none"
    return (
        f"vllm world ({cluster.serve.parallelism} = {cluster.serve.gpus}): {said}; ranks on "
        f"{cluster.head.address}:{cluster.serve.master_port} from {nodes}"
    )

"""The serving cluster (when `serve.enabled`): Ray's nodes (with `serve.launcher: native` the head's
vLLM world instead: `test_native_*`, conftest.py keeps the launcher's own), vLLM's health, models,
API key and a completion, and which transport RCCL really used between the nodes."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import pytest

from halo_cluster.config.serving import PORTS, ray_ports
from halo_cluster.decide import nccl
from halo_cluster.node import firewalld
from halo_cluster.node.facts import as_user
from halo_cluster.tools import allreduce

from .target import NOT_VERIFIED, Target, connects

STANDIN = "stand-in"


def test_ray_has_every_node_with_one_gpu(head: Target, measured) -> None:
    nodes = head.ray_nodes
    alive = {address: gpus for address, is_alive, gpus in nodes if is_alive}
    wanted = {n.address: 1 for n in head.cluster.nodes}
    assert alive == wanted, (
        f"Ray sees {alive or 'no node'}, expected {wanted} (one GPU per node at its data "
        "address): `systemctl --user status halo-ray` on the missing nodes; check the data link"
    )
    measured(f"{len(alive)} nodes, {sum(alive.values()):g} GPUs")


def test_native_world_has_every_node(head: Target, measured) -> None:
    """`serve.launcher: native`: the world size the head's executor reports is TP x PP and the
    ranks on its master port are the configured nodes, as the deploy's /health wait checks."""
    size, peers = head.world
    serve = head.cluster.serve
    assert size == serve.gpus, (
        f"the head's vLLM reports world size {size or 'none'}, expected {serve.parallelism} = "
        f"{serve.gpus}: `journalctl --user -u halo-vllm` on the head (still starting, or another "
        "config's vLLM); re-run the deploy"
    )
    wanted = sorted(n.address for n in head.cluster.nodes)
    assert peers == wanted, (
        f"the ranks on {head.cluster.head.address}:{serve.master_port} are from "
        f"{peers or 'no node'}, expected {wanted}: `systemctl --user status halo-vllm` on the "
        "missing nodes (a rank restarted alone is held out until every rank restarts: deploy "
        "again); a node not configured still runs a rank: stop its halo-vllm"
    )
    measured(f"world size {size} ({serve.parallelism}); ranks on {len(peers)} nodes")


def test_native_master_port_closed_on_the_management_side(node: Target, measured) -> None:
    port = node.cluster.serve.master_port
    zones = firewalld.management_zones(node.firewall, node.ssh_interfaces, node.interface)
    exposed = [zone for zone in zones if firewalld.exposed_in(node.firewall, zone, [port])]
    assert not exposed, (
        f"{node.name}: zone(s) {', '.join(exposed)} on the management side let vLLM's master "
        f"port {port} in: the ranks' rendezvous (torch's store) takes any client there; move the "
        "management interface to a stricter zone or remove that port"
    )
    measured(f"zones {', '.join(sorted(zones)) or 'none'}; {port} not let in")


def test_containers_run_the_cluster_digest(node: Target, measured) -> None:
    """Every node's Ray (and the head's vLLM), or with `serve.launcher: native` every node's
    vLLM rank, runs the cluster's one digest (halo-cluster.lock), made from that image as it is
    stored here."""
    wanted = ["halo-ray", "halo-vllm"] if node.node.role == "head" else ["halo-ray"]
    if node.cluster.serve.launcher == "native":
        wanted = ["halo-vllm"]
    running = node.container_images
    pinned, image_id = node.pinned, node.image_id
    for name in wanted:
        found = running.get(name)
        assert found, f"{node.name}: {name} is not running: `systemctl --user status {name}`"
        assert found["reference"] == pinned and found["id"] == image_id, (
            f"{node.name}: {name} runs {found['reference']} ({found['id'][:12]}), the cluster "
            f"{pinned} ({image_id[:12] or 'not pulled here'}): deploy again to restart it on "
            "the cluster's digest"
        )
    measured(pinned.partition("@")[2][:19] or pinned)


def test_vllm_health(head: Target, measured) -> None:
    code, _ = head.curl("/health")
    assert code == 200, (
        f"{head.url}/health answered {code or 'nothing'}: "
        "`journalctl --user -u halo-vllm` on the head (still loading, or failed)"
    )
    measured(f"{head.url}/health 200")


def test_vllm_serves_the_model(head: Target, measured) -> None:
    key = head.api_key
    code, text = head.curl("/v1/models", key)
    assert code == 200, f"/v1/models answered {code}: {text[:200]}"
    names = [m["id"] for m in json.loads(text)["data"]]
    wanted = head.cluster.serve.served_model_name
    assert wanted in names, f"/v1/models names {names}, expected {wanted}: re-run the deploy"
    if key:
        refused, _ = head.curl("/v1/models")
        assert refused == 401, f"/v1/models without the API key answered {refused}, expected 401"
        measured(f"{wanted}; 401 without the key")
    else:
        measured(wanted)


def test_completion_returns_text(head: Target, measured) -> None:
    code, text = head.curl("/v1/completions", head.api_key, head.completion_body)
    assert code == 200, f"/v1/completions answered {code}: {text[:200]}"
    answer = json.loads(text)["choices"][0]["text"]
    assert answer, "the completion returned no text"
    if STANDIN in answer:
        pytest.skip(f"{NOT_VERIFIED}: model output: the lab's stand-in answered, not a model")
    measured(repr(answer[:40]))


def test_rccl_transport(head: Target, targets: dict[str, Target], measured) -> None:
    if head.cluster.serve.transport == "sockets":
        measured(sockets_configured(head))
        return
    head.not_verified("RCCL transport (no RDMA device, no GPU, a stand-in vLLM)")
    if head.cluster.serve.nccl_debug:
        log, bandwidth = vllm_journal(head), None
        where = "halo-vllm's journal (set `serve.nccl_debug: false` to measure an all-reduce)"
    else:
        log = run_allreduce(head.cluster, targets)
        bandwidth, where = allreduce.measured(log), "the all-reduce's output"
        assert bandwidth, f"the all-reduce between the nodes did not finish: {log[-1500:]}"
    found = nccl.parse(log)
    assert found.transport, (
        f"no NCCL transport line in {where}: with `serve.nccl_debug: true`, verify again once "
        "vLLM has served a request"
    )
    assert found.rdma, (
        f"RCCL uses sockets ({found.evidence}): check /dev/infiniband inside the container, irdma "
        f"loaded, NCCL_IB_HCA naming the data port's RDMA device, GID index 1 (RoCE v2)"
        + (f"; {bandwidth.line()}" if bandwidth else "")
    )
    devices = ", ".join(found.devices) or "?"
    measured(f"via NET/IB on {devices}" + (f"; {bandwidth.line()}" if bandwidth else ""))


def sockets_configured(head: Target) -> str:
    """`serve.transport: sockets` is a choice, not a failure: passed when the head's serve.env
    pins RCCL to sockets as the deploy writes it."""
    env = head.run(head.serve_env_command).stdout
    pinned = [line for line in env.splitlines() if line.startswith(("NCCL_NET=", "NCCL_IB_DIS"))]
    assert {"NCCL_NET=Socket", "NCCL_IB_DISABLE=1"} <= set(pinned), (
        f"serve.transport: sockets, but the head's serve.env sets {pinned or 'neither'} "
        "NCCL_NET=Socket NCCL_IB_DISABLE=1: run the deploy"
    )
    return f"sockets (configured: serve.transport: sockets, {head.cluster.interconnect})"


def vllm_journal(head: Target) -> str:
    command = "journalctl --user -u halo-vllm.service -o cat --no-pager"
    return head.run(as_user(head.cluster.cluster_user, command)).stdout


def run_allreduce(cluster, targets: dict[str, Target]) -> str:
    """One rank per node, all at once; the head's output (rank 0)."""
    user = cluster.cluster_user

    def rank(index: int, node) -> str:
        target = targets[node.name]
        command = allreduce.command(
            cluster.image,
            index,
            len(cluster.nodes),
            cluster.head.address,
            target.serve_env,
            target.has_infiniband,
        )
        return target.run(as_user(user, command)).stdout

    with ThreadPoolExecutor(max_workers=len(cluster.nodes)) as pool:
        outputs = list(pool.map(rank, range(len(cluster.nodes)), cluster.nodes))
    return outputs[0]


def test_ray_ports_closed_on_every_network_but_the_data_link(node: Target, measured) -> None:
    # Ray listens on every address: each zone an interface (but the data link's) or a source
    # puts the node in counts, as the firewall role's preflight judges them
    zones = firewalld.zones_in_effect(node.firewall, node.interfaces, node.interface)
    exposed = {zone: firewalld.exposed_in(node.firewall, zone, ray_ports()) for zone in zones}
    exposed = {zone: ports for zone, ports in exposed.items() if ports}
    named = "; ".join(f"{zone} ({', '.join(zones[zone])})" for zone in exposed)
    assert not exposed, (
        f"{node.name}: zone(s) {named} let "
        f"Ray's ports in ({', '.join(f'{p[0]}..{p[-1]}' for p in exposed.values())}): anyone "
        "there can run code on the cluster; put those in a stricter zone or remove the ports"
    )
    probed = [PORTS["port"], PORTS["node-manager-port"], PORTS["object-manager-port"]]
    reached = [p for p in probed if connects(node.node.ssh_host, p)]
    assert not reached, (
        f"{node.name}: Ray's port(s) {reached} answer at {node.node.ssh_host} from this machine"
    )
    measured(f"zones {', '.join(sorted(zones)) or 'none'}; {probed} closed from here")


def test_vllm_port_on_the_management_side(head: Target, measured) -> None:
    serve, address = head.cluster.serve, head.node.ssh_host
    reached = connects(address, serve.port)
    if serve.listen == "all":
        assert reached, (
            f"{address}:{serve.port} does not answer from this machine with serve.listen: all: "
            "re-run the deploy (it opens halo-vllm in the management zone)"
        )
    else:
        assert not reached, (
            f"{address}:{serve.port} answers from this machine with serve.listen: data: vLLM "
            "should listen on the data address only; re-run the deploy"
        )
    measured(f"{address}:{serve.port} {'open' if reached else 'closed'} (listen: {serve.listen})")


def test_ray_refuses_a_client_without_the_token(head: Target, measured) -> None:
    version, answer = head.ray_without_token
    refused = "InvalidAuthToken" in answer or "AuthenticationError" in answer
    assert refused, (
        f"Ray {version} answered a client without the cluster token: RAY_AUTH_MODE=token is not "
        "in effect (Ray older than 2.52 has no token authentication); re-run the deploy"
    )
    measured(f"Ray {version}: a client without the token is refused")

"""`serve.launcher: native` planned on recorded real outputs: one `halo-vllm` rank per node (the
head's with the API server, every other node's headless with its rank in the order of `nodes`),
no Ray unit, token or object store; the master port warned about on the management side only;
every rank restarted together; a switch between the launchers removing the other's services."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from halo_cluster.config.serving import warmup_after_health
from halo_cluster.roles.serve.ranks import due_now
from tests.plan.harness import Plan, plan
from tests.plan.nodes import (
    CONFIG,
    HOME,
    converged,
    native_node,
    plan_cluster,
    serve_cluster,
    user_node,
)
from tests.recorded import FEDORA_WORKSTATION, firewalld_output, memory_output

UNITS = f"{HOME}/.config/containers/systemd"
NATIVE = ", launcher: native"
STOP = "Cluster services | Stop every rank's halo-vllm, to start them together"
START = "Cluster services | Start every rank's halo-vllm"
REMOVE = "Cluster services | Stop and remove what this node no longer runs"
RAY_FILES = (f"{UNITS}/halo-ray.container", f"{CONFIG}/ray-start.sh", f"{CONFIG}/ray-token")


def native_plan(cluster, **states: str) -> Plan:
    """The plan on a converged native cluster, a node's rank in the state given by name."""
    return plan(
        cluster,
        {n.name: native_node(cluster, n.name, states.get(n.name, "active")) for n in cluster.nodes},
    )


def serve_ops(result: Plan, name: str) -> list[str]:
    """The serve role's operations that do something on this node as it is planned."""
    return [
        op.name
        for op in result.ops[name]
        if op.name.startswith("Cluster services") and (op.commands or op.uploads)
    ]


def vllm_words(uploads: dict[str, str]) -> list[str]:
    start = uploads[f"{CONFIG}/vllm-start.sh"]
    return start[start.index("exec vllm serve ") :].split()[3:]


def test_the_head_runs_rank_0_with_the_api_and_the_worker_rank_1_headless() -> None:
    result = plan_cluster(serve_cluster(serve=NATIVE))
    head, worker = result.uploads("halo1"), result.uploads("halo2")
    common = [
        "Qwen/Qwen3-14B",
        "--host=192.168.100.1",
        "--port=8000",
        "--served-model-name=Qwen/Qwen3-14B",
        "--tensor-parallel-size=2",
        "--pipeline-parallel-size=1",
        "--distributed-executor-backend=mp",
        "--nnodes=2",
    ]
    rest = ["--master-addr=192.168.100.1", "--master-port=29501", "--gpu-memory-utilization=0.9"]
    rest += ["--max-model-len=8192", "--enforce-eager"]
    assert vllm_words(head) == [*common, "--node-rank=0", *rest]
    assert vllm_words(worker) == [*common, "--node-rank=1", *rest, "--headless"]
    for name, files in (("halo1", head), ("halo2", worker)):
        assert not any(path in files for path in RAY_FILES), name
        assert f"{CONFIG}/vllm-prestart.sh" not in files
        unit = files[f"{UNITS}/halo-vllm.container"].splitlines()
        for line in ("Restart=always", "Network=host", "AddDevice=/dev/kfd", "Ulimit=memlock=-1"):
            assert line in unit, (name, line)
        assert not any("ray" in line.lower() for line in unit), (name, unit)
        assert "ray status" not in files[f"{CONFIG}/vllm-start.sh"]
        names = result.names(name)
        assert "Cluster services | Start halo-ray" not in names
        assert START in names
    assert (
        "EnvironmentFile=%h/.config/halo-cluster/secrets.env"
        in head[f"{UNITS}/halo-vllm.container"]
    )
    assert f"{CONFIG}/secrets.env" not in worker
    assert "secrets.env" not in worker[f"{UNITS}/halo-vllm.container"]
    assert result.names("halo1")[-1] == "Cluster services | Wait for vLLM's /health"
    assert "Cluster services | Wait for vLLM's /health" not in result.names("halo2")


def test_the_ranks_keep_the_transport_pinning_without_ray_variables() -> None:
    result = plan_cluster(serve_cluster(serve=NATIVE))
    for name, address in (("halo1", "192.168.100.1"), ("halo2", "192.168.100.2")):
        env = result.uploads(name)[f"{CONFIG}/serve.env"].splitlines()
        for line in (
            f"VLLM_HOST_IP={address}",
            "NCCL_SOCKET_IFNAME=enp194s0np0",
            "GLOO_SOCKET_IFNAME=enp194s0np0",
            "NCCL_NET=IB",
            "NCCL_IB_GID_INDEX=1",
            "NCCL_IB_HCA==irdma1:1,rocep194s0:1",
            "VLLM_RPC_BASE_PATH=/run/halo-cluster/vllm-rpc",
        ):
            assert line in env, (name, line)
        assert not any(line.startswith("RAY_") for line in env), (name, env)
    sockets = plan_cluster(
        serve_cluster(interconnect="thunderbolt", serve=NATIVE),
        interconnect="thunderbolt",
        infiniband=False,
    )
    env = sockets.uploads("halo2")[f"{CONFIG}/serve.env"].splitlines()
    assert "NCCL_NET=Socket" in env and "NCCL_SOCKET_IFNAME=thunderbolt0" in env


def test_ranks_follow_the_order_of_nodes() -> None:
    cluster = serve_cluster(
        4, serve=NATIVE + ", tensor_parallel_size: 2, pipeline_parallel_size: 2"
    )
    result = plan_cluster(cluster)
    for rank, name in enumerate(("halo1", "halo2", "halo3", "halo4")):
        words = vllm_words(result.uploads(name))
        assert f"--node-rank={rank}" in words and "--nnodes=4" in words
        assert ("--headless" in words) == (rank > 0)


def test_the_api_key_stays_in_the_heads_secret_file(tmp_path) -> None:
    (tmp_path / "key").write_text("sk-native-secret\n")
    cluster = serve_cluster(serve=NATIVE + ", listen: all, api_key_file: key", tmp_path=tmp_path)
    result = plan_cluster(cluster)
    assert result.uploads("halo1")[f"{CONFIG}/secrets.env"] == "VLLM_API_KEY=sk-native-secret\n"
    for name in ("halo1", "halo2"):
        others = [t for p, t in result.uploads(name).items() if not p.endswith("secrets.env")]
        assert not any("sk-native" in text for text in others)
        assert not any("sk-native" in c for c in result.commands(name))


def test_no_ray_token_is_made_for_a_native_cluster(tmp_path) -> None:
    cluster = serve_cluster(serve=NATIVE, tmp_path=tmp_path)
    Path(cluster.serve.ray_token_file).unlink()
    result = plan_cluster(cluster)
    assert not any("Ray's token" in name for name in result.names("halo1"))


def test_an_open_zone_refuses_the_head_whose_master_port_it_lets_in(tmp_path) -> None:
    cluster = serve_cluster(serve=NATIVE, tmp_path=tmp_path)
    # Fedora Workstation's own zone, its default: every port above 1024 let in
    open_zone = firewalld_output(
        default="FedoraWorkstation", added={"FedoraWorkstation": FEDORA_WORKSTATION}
    )
    facts = {n.name: user_node(firewall=open_zone) for n in cluster.nodes}
    result = plan(cluster, facts)
    assert list(result.refused) == ["halo1"]  # the workers listen on no such port
    assert result.refused["halo1"].startswith(
        "zone FedoraWorkstation (eno1; the default zone) lets vLLM's master port "
        "(serve.master_port) in (29501): anyone there can join the cluster's vLLM ranks; "
    ), result.refused["halo1"]
    assert "Ray's ports" not in result.refused["halo1"]


def test_nothing_opens_or_closes_the_master_port(tmp_path) -> None:
    cluster = serve_cluster(serve=NATIVE, tmp_path=tmp_path)
    result = plan(cluster, {n.name: user_node() for n in cluster.nodes})
    # the only command naming it is the wait's identity check
    named = [op.name for op in result.ops["halo1"] if any("29501" in c for c in op.commands)]
    assert named == ["Cluster services | Wait for vLLM's /health"], named


def test_a_master_port_equal_to_the_api_port_is_refused() -> None:
    from halo_cluster.config.loader import ConfigError

    with pytest.raises(ConfigError) as refused:
        serve_cluster(serve=NATIVE + ", master_port: 8000")
    assert any("serve.master_port: 8000 is serve.port" in p for p in refused.value.problems)


def test_the_budget_counts_no_object_store(caplog) -> None:
    caplog.set_level(logging.INFO)
    cluster = serve_cluster(serve=NATIVE + ", object_store_mib: 8192")
    plan_cluster(cluster, memory=memory_output([3_700_000_000] * 8))
    table = next(r.getMessage() for r in caplog.records if "memory budget (" in r.getMessage())
    rows = [line.split() for line in table.splitlines()[2:]]
    assert rows and all(row[0].startswith("halo") for row in rows), table
    header = table.splitlines()[1]
    store = header.index("object store")
    for line in table.splitlines()[2:]:
        assert line[store:].startswith("0.0 GiB"), line


def test_a_converged_native_cluster_plans_nothing() -> None:
    cluster = serve_cluster(serve=NATIVE)
    result = native_plan(cluster)
    assert serve_ops(result, "halo1") == serve_ops(result, "halo2") == []


def test_a_failed_worker_rank_restarts_every_rank_together() -> None:
    cluster = serve_cluster(serve=NATIVE)
    result = native_plan(cluster, halo2="failed")
    assert serve_ops(result, "halo1") == [STOP, START, "Cluster services | Wait for vLLM's /health"]
    assert serve_ops(result, "halo2") == [STOP, START]
    stop = next(op for op in result.ops["halo2"] if op.name == STOP).commands
    assert "podman image exists" in stop[0] and stop[-1].endswith("systemctl --user stop halo-vllm")
    # every rank stops in one operation, then every rank starts in the next
    assert result.order.index(STOP) + 1 == result.order.index(START)


def test_a_change_on_the_head_alone_restarts_the_workers_rank_too(tmp_path) -> None:
    (tmp_path / "key").write_text("sk-one\n")
    serve = NATIVE + ", api_key_file: key"
    cluster = serve_cluster(serve=serve, tmp_path=tmp_path)
    nodes = {n.name: native_node(cluster, n.name) for n in cluster.nodes}
    (tmp_path / "key").write_text("sk-two\n")
    result = plan(serve_cluster(serve=serve, tmp_path=tmp_path), nodes)
    assert STOP in serve_ops(result, "halo1") and START in serve_ops(result, "halo1")
    # the worker plans both steps, empty while it is planned: they act when the run executes,
    # the head's reason recorded by then (pyinfra plans the nodes side by side)
    assert serve_ops(result, "halo2") == []
    names = result.names("halo2")
    assert names.index(STOP) + 1 == names.index(START)


def test_the_ranks_act_when_any_node_has_a_reason_once_the_run_executes() -> None:
    reasons = {"halo1": "its secrets changed"}
    assert due_now(reasons, "halo1", executing=False)
    assert not due_now(reasons, "halo2", executing=False)  # the plan shows the head's reason
    assert due_now(reasons, "halo2", executing=True)
    assert not due_now({}, "halo1", executing=True)


def test_ray_to_native_removes_rays_services_on_every_node(tmp_path) -> None:
    ray = serve_cluster(tmp_path=tmp_path)
    nodes = {n.name: converged(ray, n.name) for n in ray.nodes}
    result = plan(serve_cluster(serve=NATIVE, tmp_path=tmp_path), nodes)
    for name in ("halo1", "halo2"):
        ops = serve_ops(result, name)
        assert REMOVE in ops and ops[-2:] != [] and STOP in ops and START in ops, (name, ops)
        removal = next(op for op in result.ops[name] if op.name == REMOVE).commands
        assert "systemctl --user stop halo-ray.service" in removal[0]
        assert "halo-vllm.service" not in removal[0]
        for path in RAY_FILES:
            assert path in removal[1], (name, path)
        assert (f"{CONFIG}/vllm-prestart.sh" in removal[1]) == (name == "halo1")
        assert ops.index(REMOVE) < ops.index(STOP) < ops.index(START)
    again = native_plan(serve_cluster(serve=NATIVE, tmp_path=tmp_path))
    assert serve_ops(again, "halo1") == serve_ops(again, "halo2") == []


def test_native_to_ray_removes_the_workers_rank_and_starts_ray(tmp_path) -> None:
    native = serve_cluster(serve=NATIVE, tmp_path=tmp_path)
    nodes = {n.name: native_node(native, n.name) for n in native.nodes}
    result = plan(serve_cluster(tmp_path=tmp_path), nodes)
    worker = serve_ops(result, "halo2")
    assert REMOVE in worker and "Cluster services | Start halo-ray" in worker
    removal = next(op for op in result.ops["halo2"] if op.name == REMOVE).commands
    assert "systemctl --user stop halo-vllm.service" in removal[0]
    assert f"{UNITS}/halo-vllm.container" in removal[1]
    head = serve_ops(result, "halo1")
    assert REMOVE not in head
    assert "Cluster services | Start halo-ray" in head
    assert "Cluster services | Restart halo-vllm" in head
    assert STOP not in head + worker
    for path in RAY_FILES:
        assert path in result.uploads("halo1") and path in result.uploads("halo2")


def test_the_wait_checks_the_heads_world_against_tp_x_pp_and_the_nodes() -> None:
    """The /health wait's identity check with native: the world size TP x PP and every node's
    data address on the master port (node/vllmworld.py), where Ray's asks Ray's nodes; then, in
    both, the head's warm-up within its bound (warmup.py)."""
    bound = warmup_after_health(1)
    result = plan_cluster(serve_cluster(serve=NATIVE))
    (wait,) = [c for c in result.commands("halo1") if c.startswith("FunctionCommand(_wait")]
    assert f"['192.168.100.1', '192.168.100.2'], (2, 29501), {bound})" in wait, wait
    ray = plan_cluster(serve_cluster())
    (wait,) = [c for c in ray.commands("halo1") if c.startswith("FunctionCommand(_wait")]
    assert f"['192.168.100.1', '192.168.100.2'], None, {bound})" in wait, wait


def test_a_node_that_reboots_in_the_run_restarts_every_rank_after_it(caplog) -> None:
    """reboot: if-needed with kernel arguments not active: each node reboots (the reboot role,
    before this one) and its rank comes back alone at boot; every rank then restarts together,
    after the reboots. With `reboot: never` nothing reboots and nothing restarts (above)."""
    caplog.set_level(logging.INFO)
    cluster = serve_cluster(serve=NATIVE, top="reboot: if-needed\n")
    result = native_plan(cluster)
    for name in ("halo1", "halo2"):
        assert STOP in serve_ops(result, name) and START in serve_ops(result, name), name
        assert result.order.index(f"Reboot | Reboot {'head' if name == 'halo1' else 'worker'} "
                                  "for kernel arguments") < result.order.index(STOP)  # fmt: skip
    said = [
        r.getMessage() for r in caplog.records if "every rank restarts together" in r.getMessage()
    ]
    assert any("halo2] every rank restarts together: it reboots in this run" in s for s in said)


def test_three_nodes_serve_tp1_pp3_one_stage_a_node() -> None:
    """vLLM's multi-node executor takes pipeline stages across nodes (the world size, 3,
    divisible by --nnodes, 3): each node one rank, one stage, in the order of nodes."""
    cluster = serve_cluster(
        3, serve=NATIVE + ", tensor_parallel_size: 1, pipeline_parallel_size: 3"
    )
    result = plan_cluster(cluster)
    for rank, name in enumerate(("halo1", "halo2", "halo3")):
        words = vllm_words(result.uploads(name))
        for word in ("--tensor-parallel-size=1", "--pipeline-parallel-size=3", "--nnodes=3"):
            assert word in words, (name, word)
        assert f"--node-rank={rank}" in words and ("--headless" in words) == (rank > 0)

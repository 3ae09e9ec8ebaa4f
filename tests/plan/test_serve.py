"""Cluster services planned on recorded real outputs: the quadlets, scripts and environment per
node, for both interconnects, with and without /dev/infiniband, TP=2 and TP=2 x PP=2."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from halo_cluster.config.loader import ConfigError, parse_cluster
from tests.plan.harness import Plan, plan
from tests.plan.nodes import CONFIG, HOME, PINNED, converged, plan_cluster, serve_cluster

UNITS = f"{HOME}/.config/containers/systemd"


def test_head_runs_ray_head_and_vllm_with_rdma_options() -> None:
    result = plan_cluster(serve_cluster())
    head = result.uploads("halo1")
    unit = head[f"{UNITS}/halo-ray.container"]
    for line in (
        "Network=host",
        "PodmanArgs=--ipc=host",
        "PodmanArgs=--group-add=keep-groups",
        "PodmanArgs=--security-opt=seccomp=unconfined",
        "AddDevice=/dev/kfd",
        "AddDevice=/dev/dri",
        "AddDevice=/dev/infiniband",
        "Ulimit=memlock=-1",
        f"Image={PINNED}",  # the cluster's digest, not the tag (issue 25)
        "Restart=always",
        "TimeoutStopSec=60",
        "StopTimeout=3",  # the head's drain has no GCS to drain through
        "SuccessExitStatus=1 137",  # its SIGKILL after the bound is a stop, not a failure
        "DefaultDependencies=false",
        "WantedBy=default.target",
    ):
        assert line in unit.splitlines(), line
    worker = result.uploads("halo2")[f"{UNITS}/halo-ray.container"].splitlines()
    assert "StopTimeout=10" in worker  # a worker drains through the head's GCS first
    start = head[f"{CONFIG}/ray-start.sh"]
    assert "--head --port=6379 \\\n    --include-dashboard=false" in start
    assert "--node-ip-address=192.168.100.1 --num-gpus=1" in start
    assert "--node-manager-port=6380" in start and "--max-worker-port=10199" in start
    vllm = head[f"{CONFIG}/vllm-start.sh"]
    assert (
        "exec vllm serve Qwen/Qwen3-14B --host=192.168.100.1 --port=8000 "
        "--served-model-name=Qwen/Qwen3-14B --tensor-parallel-size=2 --pipeline-parallel-size=1 "
        "--distributed-executor-backend=ray --gpu-memory-utilization=0.9 --max-model-len=8192 "
        "--enforce-eager\n"
    ) in vllm
    assert "-ge 2 ]" in vllm  # waits for TP x PP GPUs
    env = head[f"{CONFIG}/serve.env"].splitlines()
    for line in (
        "VLLM_HOST_IP=192.168.100.1",
        "NCCL_SOCKET_IFNAME=enp194s0np0",
        "NCCL_IB_GID_INDEX=1",
        "NCCL_IB_HCA==irdma1:1,rocep194s0:1",
        "RAY_ADDRESS=192.168.100.1:6379",
        "VLLM_CONFIG_ROOT=/etc/halo-cluster/vllm",
        "VLLM_RPC_BASE_PATH=/run/halo-cluster/vllm-rpc",
        "VLLM_NO_USAGE_STATS=1",
        "TRITON_CACHE_DIR=/root/.triton/cache",
    ):
        assert line in env, line
    # only what Ray 2.60, vLLM, RCCL or huggingface_hub read: the launcher's own variables and
    # the Ray variables that do not exist in Ray 2.60 stay out
    names = {line.split("=")[0] for line in env if "=" in line and not line.startswith("#")}
    for absent in (
        "VLLM_CLUSTER_TRANSPORT",
        "VLLM_ROCE_HCA",
        "RAY_NODE_IP_ADDRESS",
        "RAY_OVERRIDE_NODE_IP_ADDRESS",
        "RAY_DISABLE_METRICS",
        "RAY_EXPERIMENTAL_NOSET_ROCR_VISIBLE_DEVICES",
    ):
        assert absent not in names, absent
    for unit in (f"{UNITS}/halo-ray.container", f"{UNITS}/halo-vllm.container"):
        assert "Volume=%t/halo-cluster/vllm-rpc:/run/halo-cluster/vllm-rpc" in head[unit]
        assert "Volume=%h/.cache/halo-cluster/triton:/root/.triton" in head[unit]
    names = head[f"{CONFIG}/vllm/ray_non_carry_over_env_vars.json"]
    assert '"NCCL_IB_HCA"' in names and '"NCCL_SOCKET_IFNAME"' in names


def test_worker_joins_the_head_and_runs_no_vllm() -> None:
    result = plan_cluster(serve_cluster())
    worker = result.uploads("halo2")
    start = worker[f"{CONFIG}/ray-start.sh"]
    assert "--address=192.168.100.1:6379" in start
    assert "--node-ip-address=192.168.100.2 --num-gpus=1" in start
    assert 'socket.create_connection(("192.168.100.1", 6379)' in start
    assert "VLLM_HOST_IP=192.168.100.2" in worker[f"{CONFIG}/serve.env"].splitlines()
    assert not any("vllm" in path.rsplit("/", 1)[1] for path in worker if path.startswith(UNITS))
    assert f"{CONFIG}/secrets.env" not in worker
    names = result.names("halo2")
    assert "Cluster services | Start halo-ray" in names
    assert "Cluster services | Start halo-vllm" not in names
    assert "Cluster services | Wait for vLLM's /health" not in names


def test_operations_run_in_role_order_and_end_waiting_for_health() -> None:
    """pyinfra orders operations by call-stack line numbers; roles must not interleave."""
    result = plan_cluster(serve_cluster(top="reboot: if-needed\n"))
    roles = [name.split(" | ")[0] for name in result.names("halo1")]
    firsts = list(dict.fromkeys(roles))
    assert firsts == sorted(firsts, key=roles.index)
    assert [r for i, r in enumerate(roles) if i == 0 or roles[i - 1] != r] == firsts
    assert result.names("halo1")[-1] == "Cluster services | Wait for vLLM's /health"
    assert roles.index("Reboot") < roles.index("Cluster services")


def test_no_rdma_options_without_dev_infiniband() -> None:
    unit = plan_cluster(serve_cluster(), infiniband=False).uploads("halo1")
    text = unit[f"{UNITS}/halo-ray.container"]
    assert "AddDevice=/dev/infiniband" not in text and "Ulimit=memlock=-1" not in text
    assert "AddDevice=/dev/kfd" in text


def test_thunderbolt_uses_sockets() -> None:
    cluster = serve_cluster(interconnect="thunderbolt")
    result = plan_cluster(cluster, interconnect="thunderbolt", infiniband=False)
    env = result.uploads("halo1")[f"{CONFIG}/serve.env"].splitlines()
    assert "NCCL_IB_DISABLE=1" in env
    assert "NCCL_SOCKET_IFNAME=thunderbolt0" in env
    assert not any(line.startswith("NCCL_IB_HCA") for line in env)


def test_four_nodes_tp2_pp2() -> None:
    cluster = serve_cluster(4, serve=", tensor_parallel_size: 2, pipeline_parallel_size: 2")
    result = plan_cluster(cluster)
    vllm = result.uploads("halo1")[f"{CONFIG}/vllm-start.sh"]
    assert "--tensor-parallel-size=2 --pipeline-parallel-size=2" in vllm
    assert "-ge 4 ]" in vllm
    for name in ("halo2", "halo3", "halo4"):
        start = result.uploads(name)[f"{CONFIG}/ray-start.sh"]
        assert "--address=192.168.100.1:6379" in start


def test_api_key_only_in_the_secret_file(tmp_path) -> None:
    (tmp_path / "key").write_text("sk-lab-secret-123\n")
    cluster = serve_cluster(serve=", listen: all, api_key_file: key", tmp_path=tmp_path)
    result = plan_cluster(cluster)
    head = result.uploads("halo1")
    assert head[f"{CONFIG}/secrets.env"] == "VLLM_API_KEY=sk-lab-secret-123\n"
    assert "--host=0.0.0.0" in head[f"{CONFIG}/vllm-start.sh"]
    others = [text for path, text in head.items() if not path.endswith("secrets.env")]
    assert not any("sk-lab-secret" in text for text in others)
    assert not any("sk-lab-secret" in c for c in result.commands("halo1"))
    chmod = [c for c in result.commands("halo1") if ".secrets.env.halo-new" in c]
    assert any("chmod 600" in c and "chown vllm:" in c for c in chmod)


def test_hf_token_on_every_node_that_downloads_0600_never_in_argv(tmp_path) -> None:
    """Each node gets its own 0600 token file, mounted for `hf download` and the containers
    (HF_TOKEN_PATH); no worker needs the head's secrets.env, and the token is in no command."""
    (tmp_path / "hf").write_text("hf_labtoken123\n")
    (tmp_path / "hf").chmod(0o600)
    cluster = serve_cluster(serve=", download: every, hf_token_file: hf", tmp_path=tmp_path)
    result = plan_cluster(cluster)
    for name in ("halo1", "halo2"):
        files = result.uploads(name)
        assert files[f"{CONFIG}/hf-token"] == "hf_labtoken123\n"
        assert "HF_TOKEN_PATH=/etc/halo-cluster/hf-token" in files[f"{CONFIG}/serve.env"]
        others = [text for path, text in files.items() if not path.endswith("hf-token")]
        assert not any("hf_labtoken" in text for text in others)
        commands = result.commands(name)
        assert not any("hf_labtoken" in c for c in commands)
        chmod = [c for c in commands if ".hf-token.halo-new" in c]
        assert any("chmod 600" in c and "chown vllm:" in c for c in chmod)
        download = next(c for c in commands if "hf download" in c)
        assert "hf-token:/etc/halo-cluster/hf-token:ro" in download
        assert "serve.env" in download and "secrets.env" not in download
    assert f"{CONFIG}/secrets.env" not in result.uploads("halo2")


@pytest.mark.parametrize(
    ("serve", "message"),
    [
        (", tensor_parallel_size: 4", "TP 4 x PP 1 = 4 GPUs, but the cluster has 2 nodes"),
        (", listen: all", "serve.api_key_file: required with serve.listen: all"),
        (", gpu_memory_utilization: 0.97", "0.97 is outside (0, 0.95]"),
        (", extra_args: ['--x y']", "serve.extra_args[0]: '--x y' is not a single"),
        (", env: {'BAD NAME': x}", "'BAD NAME' is not an environment variable name"),
    ],
)
def test_bad_serve_values_are_one_line(serve: str, message: str) -> None:
    with pytest.raises(ConfigError) as refused:
        serve_cluster(serve=serve)
    assert any(message in line for line in refused.value.problems), refused.value.problems


def serve_ops(result: Plan, name: str) -> list[str]:
    """The serve role's operations that do something on this node."""
    return [
        op.name
        for op in result.ops[name]
        if op.name.startswith("Cluster services") and (op.commands or op.uploads)
    ]


def test_rerun_writes_nothing_and_restarts_nothing() -> None:
    cluster = serve_cluster(top="")
    nodes = {n.name: converged(cluster, n.name) for n in cluster.nodes}
    result = plan(cluster, nodes)
    assert serve_ops(result, "halo2") == []
    assert serve_ops(result, "halo1") == []
    assert not any(p.startswith((CONFIG, UNITS)) for p in result.uploads("halo1"))


def test_rerun_waits_when_vllm_does_not_answer() -> None:
    cluster = serve_cluster()
    nodes = {n.name: converged(cluster, n.name, health="503") for n in cluster.nodes}
    ops = serve_ops(plan(cluster, nodes), "halo1")
    assert ops == ["Cluster services | Wait for vLLM's /health"]


def test_a_changed_vllm_option_restarts_vllm_only() -> None:
    before = serve_cluster()
    after = serve_cluster(serve=", max_num_seqs: 4")
    nodes = {n.name: converged(before, n.name) for n in before.nodes}
    result = plan(after, nodes)
    ops = serve_ops(result, "halo1")
    assert "Cluster services | Restart halo-vllm" in ops
    assert "Cluster services | Restart halo-ray" not in ops
    assert serve_ops(result, "halo2") == []


def test_failed_vllm_is_started_again() -> None:
    cluster = serve_cluster()
    nodes = {n.name: converged(cluster, n.name, active=False) for n in cluster.nodes}
    assert "Cluster services | Start halo-vllm" in serve_ops(plan(cluster, nodes), "halo1")


def test_disabled_stops_and_removes_the_services() -> None:
    enabled = serve_cluster()
    disabled = parse_cluster(
        yaml.safe_load(
            "cluster_user: vllm\nnodes:\n"
            "  - {name: halo1, ssh: {host: 10.0.0.11}, data: {interface: auto}}\n"
            "  - {name: halo2, ssh: {host: 10.0.0.12}, data: {interface: auto}}\n"
        )
    )
    nodes = {n.name: converged(enabled, n.name) for n in enabled.nodes}
    result = plan(disabled, nodes)
    assert serve_ops(result, "halo1") == ["Cluster services | Stop and remove the cluster services"]
    assert serve_ops(result, "halo2") == ["Cluster services | Stop and remove the cluster services"]
    commands = "\n".join(result.commands("halo1"))
    assert commands.index("systemctl --user stop") < commands.index("rm -f")
    assert f"{UNITS}/halo-vllm.container" in commands


def test_ray_token_on_every_node_0600_and_a_new_one_restarts_ray(tmp_path) -> None:
    cluster = serve_cluster(tmp_path=tmp_path)
    token = Path(cluster.serve.ray_token_file).read_text()
    first = plan_cluster(cluster)
    for name in ("halo1", "halo2"):
        assert first.uploads(name)[f"{CONFIG}/ray-token"] == token
        assert not any(token.strip() in c for c in first.commands(name))
        chmod = [c for c in first.commands(name) if ".ray-token.halo-new" in c]
        assert any("chmod 600" in c and "chown vllm:" in c for c in chmod)
    env = first.uploads("halo1")[f"{CONFIG}/serve.env"]
    assert "RAY_AUTH_MODE=token\nRAY_AUTH_TOKEN_PATH=/etc/halo-cluster/ray-token\n" in env
    for unit in ("halo-ray", "halo-vllm"):
        mount = "Volume=%h/.config/halo-cluster/ray-token:/etc/halo-cluster/ray-token:ro"
        assert mount in first.uploads("halo1")[f"{UNITS}/{unit}.container"].splitlines()
    nodes = {n.name: converged(cluster, n.name) for n in cluster.nodes}
    Path(cluster.serve.ray_token_file).write_text("f" * 64 + "\n")
    again = plan(cluster, nodes)
    assert "Cluster services | Restart halo-ray" in serve_ops(again, "halo2")
    assert "Cluster services | Restart halo-vllm" in serve_ops(again, "halo1")


def test_vllm_serves_until_just_before_ray_restarts_on_any_node(tmp_path) -> None:
    """A change that restarts Ray (here the token) stops vLLM on the head only once everything
    before the restarts ran, then the workers' Ray while the head's GCS is up to drain through,
    then restarts Ray on every node: an upgrade's downtime is the restart alone (issue 25)."""
    cluster = serve_cluster(tmp_path=tmp_path)
    nodes = {n.name: converged(cluster, n.name) for n in cluster.nodes}
    Path(cluster.serve.ray_token_file).write_text("f" * 64 + "\n")
    result = plan(cluster, nodes)
    stop, ray = (
        "Cluster services | Stop halo-vllm for Ray's restart",
        "Cluster services | Restart halo-ray",
    )
    assert serve_ops(result, "halo1")[-4:] == [
        stop,
        ray,
        "Cluster services | Restart halo-vllm",
        "Cluster services | Wait for vLLM's /health",
    ]
    workers_first = "Cluster services | Stop the workers' halo-ray before the head's"
    assert serve_ops(result, "halo2")[-2:] == [workers_first, ray]
    assert stop not in serve_ops(result, "halo2")
    assert workers_first not in serve_ops(result, "halo1")
    # every node's Ray restarts in one operation, after vLLM and the workers' Ray stopped
    assert result.order.index(stop) + 1 == result.order.index(workers_first)
    assert result.order.index(workers_first) + 1 == result.order.index(ray)
    assert result.order.count(ray) == 1
    stops = next(op for op in result.ops["halo2"] if op.name == workers_first).commands
    assert "podman image exists" in stops[0]  # stopped only where it can start again
    assert stops[-1].endswith("systemctl --user stop halo-ray")
    again = {n.name: converged(cluster, n.name) for n in cluster.nodes}
    assert serve_ops(plan(cluster, again), "halo1") == []  # converged: nothing stops


def test_vllm_is_not_stopped_for_ray_when_it_would_not_start_again(tmp_path) -> None:
    """A refused worker (its RDMA port down) holds vLLM's start: then its stop for Ray's
    restart does not run either, and the running vLLM is left as it is."""
    cluster = serve_cluster(tmp_path=tmp_path, serve=", transport: rdma")
    nodes = {"halo1": converged(cluster, "halo1"), "halo2": converged(cluster, "halo2")}
    Path(cluster.serve.ray_token_file).write_text("f" * 64 + "\n")
    healthy = plan(cluster, nodes)
    stop = "Cluster services | Stop halo-vllm for Ray's restart"
    assert next(op for op in healthy.ops["halo1"] if op.name == stop).runs
    nodes["halo2"] = converged(cluster, "halo2", rdma="irdma0")
    refused = plan(cluster, nodes)
    assert list(refused.refused) == ["halo2"]
    assert not next(op for op in refused.ops["halo1"] if op.name == stop).runs


def test_a_failed_start_is_left_to_systemd_and_the_wait() -> None:
    result = plan_cluster(serve_cluster())
    starts = [c for c in result.commands("halo1") if "systemctl --user start" in c]
    assert len(starts) == 2
    for start in starts:
        assert start.endswith("|| echo 'the start failed: systemd tries again (Restart=always)'")
    unit = result.uploads("halo1")[f"{UNITS}/halo-vllm.container"].splitlines()
    assert "ExecStartPre=/bin/sh %h/.config/halo-cluster/vllm-prestart.sh" in unit
    assert "grace" not in result.uploads("halo1")[f"{CONFIG}/vllm-prestart.sh"]
    assert f"{CONFIG}/vllm-prestart.sh" not in result.uploads("halo2")


def test_without_the_wait_a_failed_start_fails_the_deploy() -> None:
    result = plan_cluster(serve_cluster(serve=", wait: false"))
    starts = [c for c in result.commands("halo1") if "systemctl --user start" in c]
    assert len(starts) == 2 and not any("||" in c for c in starts)

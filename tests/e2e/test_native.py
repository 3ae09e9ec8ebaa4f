"""`serve.launcher: native` on the serving lab: a switch from Ray to vLLM's own multi-node
launcher (the stand-in's, lab/standin/vllm_native.py) that serves on the head's data address
with a headless rank on the worker and no Ray, drift 0, status showing which rank runs where;
an image upgrade (its gate without the bench's runs) moves every rank to a new build and a
rollback by hand returns, each serving again with the head's world whole; then back to the lab's
own config (Ray), drift 0 again. The serving lab is changed and restored (`serving`). Last, on
the 4-node lab after test_membership (`last`): its first three nodes serving TP 1 x PP 3
natively, one rank each, which vLLM's multi-node executor allows (the world size, 3, divisible
by nnodes, 3: vllm/config/parallel.py; remote ranks' response queues for every rank, the last
stage's output from the last node: vllm/v1/executor/multiproc_executor.py)."""

from __future__ import annotations

import json

import pytest

from halo_cluster.config import lock as locks
from tests.e2e.conftest import Lab, failure, summary
from tests.e2e.helpers_cluster import HALO_CLUSTER, NAME, cluster_digest, run
from tests.e2e.serving_lab import HEAD, SERVE, THREE, health, pipeline, user, wait_serving

NATIVE = SERVE.replace("serve:\n", "serve:\n  launcher: native\n", 1)
RANK_IMAGE = "podman container inspect --format '{{.ImageName}}' halo-vllm"


LAUNCHERS = {"halo-vllm", "halo-ray"}  # the serving containers a launcher runs


def containers(lab: Lab, node: str) -> set[str]:
    """The launchers' containers running on `node`: not the toolbox (an earlier test's
    `toolbox run` may have left it running, as a user's would) nor the metrics role's
    Prometheus, which runs on the head with either launcher."""
    names = user(lab, node, "podman ps --format '{{.Names}}'").split()
    return LAUNCHERS & set(names)


def drift(config) -> None:
    found = run([HALO_CLUSTER, "drift", "--config", str(config)], config)
    assert found.returncode == 0, found.stdout + found.stderr[-2000:]


def status(config) -> str:
    """`halo-cluster status` up (exit 0), its output: no Ray, a rank per node in the world."""
    found = run([HALO_CLUSTER, "status", "--config", str(config)], config)
    assert found.returncode == 0, found.stdout + found.stderr[-2000:]
    assert "halo-ray" not in found.stdout and "  rank  " in found.stdout, found.stdout
    return found.stdout


def verified(config) -> None:
    """`halo-cluster verify`'s native rows: the head's world whole, the master port closed on
    the management side, every rank on the cluster's digest; no Ray check run."""
    found = run([HALO_CLUSTER, "verify", "--config", str(config)], config)
    rows = summary(found)
    assert rows[("cluster", "native_world_has_every_node")] == "passed", found.stdout[-3000:]
    for node in ("node1", "node2"):
        for check in ("native_master_port_closed_on_the_management_side",
                      "containers_run_the_cluster_digest"):  # fmt: skip
            assert rows[(node, check)] == "passed", (node, check, found.stdout[-3000:])
    assert not any(check.startswith("ray_") for _, check in rows), sorted(rows)


def every_rank_runs(lab: Lab, nodes: list[str], digest: str) -> None:
    for node in nodes:
        assert user(lab, node, RANK_IMAGE).strip() == f"{NAME}@{digest}", node


def command(name: str, config) -> tuple[int, str]:
    """`halo-cluster upgrade` or `rollback`: its code and its output, the tool's lines last."""
    result = run([HALO_CLUSTER, name, "--config", str(config)], config, timeout=1200)
    return result.returncode, result.stderr + result.stdout


def upgrade_and_roll_back(lab: Lab) -> None:
    """A good build published: `upgrade` (its gate's image and completion checks, not the
    bench's runs) moves every rank, then `rollback` by hand returns, each serving with the head's
    world whole (the deploy's /health wait checks it) and drift 0."""
    from lab import cli

    config = lab.config("reboot: if-needed\n" + NATIVE.replace(
        "  concurrency: [1, 4]\n", "  concurrency: [1, 4]\n  gate: false\n"))  # fmt: skip
    before = cluster_digest(config)
    published = cli.publish_image()
    code, output = command("upgrade", config)
    assert code == 0, output[-4000:]
    assert "downtime: " in output, output[-2000:]
    every_rank_runs(lab, lab.nodes, published)
    assert health(lab) == "200"
    code, output = command("rollback", config)
    assert code == 0, output[-4000:]
    every_rank_runs(lab, lab.nodes, before)
    assert health(lab) == "200" and cluster_digest(config) == before
    events = lab.ssh("node1", f"cat ~vllm/{locks.HISTORY}").splitlines()
    assert json.loads(events[-2])["event"] == "rolled-back"
    drift(config)


def test_a_switch_to_native_serves_without_ray_and_back(serving: Lab) -> None:
    lab = serving
    assert NATIVE != SERVE
    native = lab.config("reboot: if-needed\n" + NATIVE)
    result = lab.deploy(config=native)
    assert result.returncode == 0, failure(result)
    wait_serving(lab)
    assert health(lab) == "200"
    reply = lab.ssh(
        "node1",
        f"curl -s http://{HEAD}:8000/v1/completions -H 'Content-Type: application/json' "
        '-d \'{"prompt": "ping"}\'',
    )
    assert "stand-in" in json.loads(reply)["choices"][0]["text"]
    for node in lab.nodes:
        assert containers(lab, node) == {"halo-vllm"}, node
        assert "ray-token" not in lab.ssh(node, "ls ~vllm/.config/halo-cluster")
    assert user(lab, "node2", "systemctl --user is-active halo-vllm").strip() == "active"
    start = lab.ssh("node2", "cat ~vllm/.config/halo-cluster/vllm-start.sh")
    assert "--node-rank=1" in start and "--headless" in start
    drift(native)
    shown = status(native)
    assert "0 API, in the world" in shown and "1 headless, in the world" in shown, shown
    verified(native)
    upgrade_and_roll_back(lab)

    back = lab.config("reboot: if-needed\n" + SERVE)
    result = lab.deploy(config=back)
    assert result.returncode == 0, failure(result)
    wait_serving(lab)
    assert containers(lab, "node1") == {"halo-ray", "halo-vllm"}
    assert containers(lab, "node2") == {"halo-ray"}
    drift(back)


@pytest.mark.last  # after test_membership, on its lab: nodes 1-3, node4 outside the cluster
def test_three_nodes_tp1_pp3_serve_natively() -> None:
    lab = Lab(4, "roce").ensure_up()
    config = pipeline(lab, THREE, NATIVE)
    result = lab.deploy(config=config)
    assert result.returncode == 0, failure(result)
    wait_serving(lab)
    for rank, node in enumerate(THREE):
        assert containers(lab, node) == {"halo-vllm"}, node
        start = lab.ssh(node, "cat ~vllm/.config/halo-cluster/vllm-start.sh")
        for word in (f"--node-rank={rank}", "--nnodes=3", "--pipeline-parallel-size=3"):
            assert word in start, (node, word)
    reply = lab.ssh(
        "node1",
        f"curl -s http://{HEAD}:8000/v1/completions -H 'Content-Type: application/json' "
        '-d \'{"prompt": "ping"}\'',
    )
    assert "stand-in" in json.loads(reply)["choices"][0]["text"]
    shown = status(config)
    assert "2 headless, in the world" in shown and "world size 3;" in shown, shown
    drift(config)

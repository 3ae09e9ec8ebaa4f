"""`serve.launcher: native` on the serving lab: a switch from Ray to vLLM's own multi-node
launcher (the stand-in's, lab/standin/vllm_native.py) that serves on the head's data address
with a headless rank on the worker and no Ray, drift 0; then back to the lab's own config (Ray),
drift 0 again. The serving lab is changed and restored (`serving`)."""

from __future__ import annotations

import json

from tests.e2e.conftest import Lab, failure
from tests.e2e.helpers_cluster import HALO_CLUSTER, run
from tests.e2e.serving_lab import HEAD, SERVE, health, user, wait_serving

NATIVE = SERVE.replace("serve:\n", "serve:\n  launcher: native\n", 1)


def containers(lab: Lab, node: str) -> set[str]:
    """The cluster's service containers running on `node` (`halo-*`; not the toolbox, which an
    earlier test's `toolbox run` may have left running, as a user's would)."""
    names = user(lab, node, "podman ps --format '{{.Names}}'").split()
    return {name for name in names if name.startswith("halo-")}


def drift(config) -> None:
    found = run([HALO_CLUSTER, "drift", "--config", str(config)], config)
    assert found.returncode == 0, found.stdout + found.stderr[-2000:]


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

    back = lab.config("reboot: if-needed\n" + SERVE)
    result = lab.deploy(config=back)
    assert result.returncode == 0, failure(result)
    wait_serving(lab)
    assert containers(lab, "node1") == {"halo-ray", "halo-vllm"}
    assert containers(lab, "node2") == {"halo-ray"}
    drift(back)

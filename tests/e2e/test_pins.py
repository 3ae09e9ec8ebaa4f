"""One image for the whole cluster on the serving lab (issue 25, design steps 1 and 2): after the
tag moved, a re-installed node gets the cluster's digest, not the tag's; a container changed by
hand to another digest is reported by drift and verify and repaired by the next deploy."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from lab import cli
from tests.e2e.conftest import Lab, failure
from tests.e2e.helpers_cluster import HALO_CLUSTER, INSPECT, NAME, cluster_digest, run
from tests.e2e.serving_lab import SERVE, user, wait_serving

pytestmark = pytest.mark.serving
UNITS = "~vllm/.config/containers/systemd"


def serving_config(lab: Lab) -> Path:
    return lab.config("reboot: if-needed\n" + SERVE)


def test_reinstalled_node_gets_the_cluster_digest(serving: Lab) -> None:
    lab, config = serving, serving_config(serving)
    digest = cluster_digest(config)
    assert digest, "the serving lab's deploy recorded no digest in the lab's lock"
    published = cli.publish_image()  # `latest` moves to a new build on every node's view
    assert published != digest
    # node2 as a re-installed node finds it: no services, no containers, no images
    user(lab, "node2", "systemctl --user stop halo-ray halo-vllm", check=False)
    lab.ssh("node2", f"rm -f {UNITS}/halo-ray.container {UNITS}/halo-vllm.container")
    user(lab, "node2", "systemctl --user daemon-reload")
    user(lab, "node2", "podman rm -af")
    user(lab, "node2", "podman rmi -af")
    result = lab.deploy(config=config)
    assert result.returncode == 0, failure(result)
    wait_serving(lab)
    for node in lab.nodes:
        assert user(lab, node, INSPECT).strip() == f"{NAME}@{digest}", node
    assert cluster_digest(config) == digest  # a plain deploy never moves the cluster
    history = lab.ssh("node1", "cat ~vllm/.local/state/halo-cluster/history.jsonl")
    assert '"event":"resolved"' in history and digest in history


def test_a_hand_changed_container_is_reported_and_repaired(serving: Lab) -> None:
    lab, config = serving, serving_config(serving)
    digest = cluster_digest(config)
    other = cli.publish_image()
    user(lab, "node2", f"podman pull --quiet {NAME}@{other}")
    # node2's Ray container replaced by hand with one of another build
    user(lab, "node2", "systemctl --user stop halo-ray")
    user(lab, "node2", f"podman run -d --name halo-ray --network host {NAME}@{other} sleep inf")
    drift = run([HALO_CLUSTER, "drift", "--config", str(config)], config)
    assert drift.returncode == 2, drift.stdout + drift.stderr[-2000:]
    assert f"node2: halo-ray runs {other}, the cluster {digest}" in drift.stdout
    verify = run([sys.executable, "-m", "pytest", "tests/infra", "-q", "-p", "no:cacheprovider",
                  "-k", "containers_run_the_cluster_digest"], config)  # fmt: skip
    assert verify.returncode != 0, verify.stdout[-3000:]
    assert f"node2: halo-ray runs {NAME}@{other}" in verify.stdout
    result = lab.deploy(config=config)
    assert result.returncode == 0, failure(result)
    wait_serving(lab)
    assert user(lab, "node2", INSPECT).strip() == f"{NAME}@{digest}"
    drift = run([HALO_CLUSTER, "drift", "--config", str(config)], config)
    assert drift.returncode == 0, drift.stdout + drift.stderr[-2000:]

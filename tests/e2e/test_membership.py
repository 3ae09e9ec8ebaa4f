"""A node removed from cluster.yml really leaves (issue 25, item 3; design step 3), on a 3-node
cluster (the 4-node lab's first three nodes) serving TP 1 x PP 3: node3 removed, the deploy takes
it out over the data link and rotates the Ray token; the cluster serves on two nodes, Ray's alive
nodes are exactly those two, node3's services are stopped and their files gone, and so a minute
later (drift and status run during the wait); node3 added again, the cluster serves on three."""

from __future__ import annotations

import json
import shlex
import time

import pytest

from halo_cluster.config import lock as locks
from halo_cluster.config import state
from halo_cluster.roles.serve.services import RAY_NODES
from lab import cli
from tests.e2e.conftest import Lab, failure
from tests.e2e.helpers_cluster import HALO_CLUSTER, run
from tests.e2e.serving_lab import THREE, pipeline, user, wait_serving

# the 4-node lab, after the 2-node tests: a cluster of its first three nodes, node4 outside it
# until test_serve's 4-node test (after this one) adds it on the same lab
pytestmark = pytest.mark.last
UNITS = ".config/containers/systemd"
NODE3 = "192.168.100.3"
LEFT = (
    f"node3 ({NODE3}) left the cluster: its Ray and vLLM services stopped and removed; "
    "Ray token rotated"
)


def ray_alive(lab: Lab) -> list[str]:
    ray = 'exec "$(sed -n "1s/^#!//p" "$(command -v ray)")" -c ' + shlex.quote(RAY_NODES)
    found = user(lab, "node1", f"podman exec halo-ray sh -c {shlex.quote(ray)} 2>/dev/null")
    return (found.strip().splitlines()[-1:] or [""])[0].split()


def node3_left(lab: Lab) -> None:
    """node3 runs nothing of ours and has no unit file to start it again."""
    states = user(lab, "node3", "systemctl --user is-active halo-ray halo-vllm", check=False)
    assert states.split() == ["inactive", "inactive"], states
    files = user(lab, "node3", f"sh -c 'ls ~/{UNITS}/halo-* 2>/dev/null'", check=False)
    assert files.strip() == ""
    assert "halo-" not in user(lab, "node3", "podman ps -a --format '{{.Names}}'")


def test_a_removed_node_leaves_and_a_re_added_one_joins() -> None:
    lab = Lab(4, "roce").ensure_up()
    three = pipeline(lab, THREE)
    result = lab.deploy(config=three)
    assert result.returncode == 0, failure(result)
    wait_serving(lab)
    assert ray_alive(lab) == ["192.168.100.1", "192.168.100.2", NODE3]
    token = (state.folder(cli.LAB_DIR) / "ray-token").read_text()

    two = pipeline(lab, THREE[:2])
    result = lab.deploy(config=two)
    left = time.monotonic()  # the minute counts from the deploy that took node3 out
    assert result.returncode == 0, failure(result)
    assert LEFT in result.stdout + result.stderr
    wait_serving(lab)
    assert ray_alive(lab) == ["192.168.100.1", "192.168.100.2"]
    node3_left(lab)
    assert (state.folder(cli.LAB_DIR) / "ray-token").read_text() != token
    lock = json.loads(locks.found(cli.LAB_DIR).read_text())
    assert [n["name"] for n in lock["left"]] == ["node3"]
    history = user(lab, "node1", f"cat ~vllm/{locks.HISTORY}")
    assert '"event":"member-left"' in history and f'"address":"{NODE3}"' in history

    drift = run([HALO_CLUSTER, "drift", "--config", str(two)], two)
    assert drift.returncode == 0, drift.stdout + drift.stderr[-2000:]
    status = run([HALO_CLUSTER, "status", "--config", str(two)], two)
    assert status.returncode == 0, status.stdout + status.stderr[-2000:]
    time.sleep(max(0.0, 60 - (time.monotonic() - left)))
    assert ray_alive(lab) == ["192.168.100.1", "192.168.100.2"]
    node3_left(lab)
    wait_serving(lab, timeout=10)

    result = lab.deploy(config=pipeline(lab, THREE))
    assert result.returncode == 0, failure(result)
    wait_serving(lab)
    assert ray_alive(lab) == ["192.168.100.1", "192.168.100.2", NODE3]
    lock = json.loads(locks.found(cli.LAB_DIR).read_text())
    assert lock["left"] == [] and [n["name"] for n in lock["members"]][-1] == "node3"

"""The serving lab after changes a real cluster meets: groups that must reach the running
services, a renamed cluster user, a model folder on the nodes, a broken contract between
vLLM's and Ray's containers, which must fail in the lab as it would with a real vLLM, and last
`serve.enabled: false` (the one change the serving tests leave: after all of them, marked
`serve_off`)."""

from __future__ import annotations

import json

import pytest

from halo_cluster.node.facts import as_user
from lab import cli
from tests.e2e.conftest import Lab, failure
from tests.e2e.serving_lab import HEAD, SERVE, health, journal, user, wait_serving
from tests.e2e.waits import until

MODEL_DIR = "/srv/models/opt-125m"


def groups_of_ray(lab: Lab, node: str) -> set[int]:
    pid = lab.ssh(node, "pgrep -u vllm -f '[r]aylet/raylet' | head -n1").strip()
    line = lab.ssh(node, f"grep '^Groups:' /proc/{pid}/status")
    return {int(g) for g in line.split()[1:]}


def test_a_group_the_user_manager_lacks_reaches_the_services_without_a_reboot(
    serving: Lab,
) -> None:
    lab = serving
    video = int(lab.ssh("node2", "getent group video | cut -d: -f3"))
    # as on a node whose user got a device group after its manager started
    lab.ssh("node2", "gpasswd -d vllm video >/dev/null && systemctl restart user@1000.service")
    raylet = "pgrep -u vllm -f '[r]aylet/raylet'"
    until(lambda: lab.ssh("node2", raylet, check=False).strip(), 120, "the worker's Ray back")
    assert video not in groups_of_ray(lab, "node2")
    result = lab.deploy(config=lab.config("reboot: if-needed\n" + SERVE))
    assert result.returncode == 0, failure(result)
    assert "Restart vllm's systemd manager (groups and limits)" in result.stdout + result.stderr
    wait_serving(lab)
    assert video in groups_of_ray(lab, "node2")
    again = lab.deploy(config=lab.config("reboot: if-needed\n" + SERVE))
    assert "Restart vllm's systemd manager" not in again.stdout + again.stderr


def renamed(extra: str) -> str:
    return cli.CONFIG.read_text().replace("cluster_user: vllm\n", "cluster_user: vllm2\n") + extra


def test_a_renamed_cluster_user_and_a_model_folder_leave_nothing_of_the_old_cluster(
    serving: Lab,
) -> None:
    lab = serving
    for name in lab.nodes:  # the model, as a folder on every node (no download for a path)
        lab.ssh(name, f"mkdir -p {MODEL_DIR} && echo '{{\"model_type\": \"opt\"}}' > "
                f"{MODEL_DIR}/config.json")  # fmt: skip
    config = cli.LAB_DIR / "cluster-renamed.yml"
    config.write_text(
        renamed("reboot: if-needed\n" + SERVE.replace("facebook/opt-125m", MODEL_DIR))
    )
    result = lab.deploy(config=config)
    assert result.returncode == 0, failure(result)
    assert (
        "Stop and remove vllm's cluster services (cluster_user is vllm2)"
        in result.stderr + result.stdout
    )
    for name in lab.nodes:
        assert "halo-" not in user(lab, name, "podman ps -a --format '{{.Names}}'")
        left = lab.ssh(name, "ls ~vllm/.config/containers/systemd 2>/dev/null || true")
        assert "halo-" not in left
        raylets = lab.ssh(name, "ps -eo user:20,args | grep '[r]aylet/raylet'")
        assert {line.split()[0] for line in raylets.splitlines()} == {"vllm2"}, raylets
    recorded = as_user("vllm2", "podman exec halo-vllm cat /tmp/halo-standin-vllm.json")
    record = json.loads(lab.ssh("node1", recorded))
    assert record["argv"][2] == MODEL_DIR
    assert {rank["model"] for rank in record["ranks"]} == {MODEL_DIR}
    assert health(lab) == "200"
    # and back: vllm2's cluster is the leftover now
    back = lab.deploy(config=lab.config("reboot: if-needed\n" + SERVE))
    assert back.returncode == 0, failure(back)
    assert (
        "Stop and remove vllm2's cluster services (cluster_user is vllm)"
        in back.stderr + back.stdout
    )
    assert f"serving facebook/opt-125m at http://{HEAD}:8000" in back.stderr


def test_a_vllm_that_does_not_share_the_rendezvous_folder_fails_in_the_lab(serving: Lab) -> None:
    """Real vLLM's driver and its GPU worker meet in VLLM_RPC_BASE_PATH: without the shared
    folder the stand-in fails, as a real vLLM would (it would hang), and the deploy repairs it."""
    lab = serving
    unit = "~vllm/.config/containers/systemd/halo-vllm.container"
    user(lab, "node1", f"sed -i '/vllm-rpc$/d' {unit}")
    user(lab, "node1", "systemctl --user daemon-reload")
    user(lab, "node1", "systemctl --user restart halo-vllm")
    refused = "must share VLLM_RPC_BASE_PATH"
    until(
        lambda: refused in journal(lab, "halo-vllm"), 180, lambda: journal(lab, "halo-vllm")[-3000:]
    )
    assert health(lab) != "200"
    result = lab.deploy(config=lab.config("reboot: if-needed\n" + SERVE))
    assert result.returncode == 0, failure(result)
    wait_serving(lab)


@pytest.mark.serve_off  # after every serving test, test_upgrade.py's too
def test_disabled_leaves_no_unit_and_no_container(serving: Lab) -> None:
    lab = serving
    result = lab.deploy(config=lab.config("reboot: if-needed\nserve: {enabled: false}\n"))
    assert result.returncode == 0, result.stderr[-3000:]
    for name in lab.nodes:
        left = lab.ssh(
            name,
            "ls ~vllm/.config/containers/systemd ~vllm/.config/halo-cluster 2>/dev/null || true",
        )
        ours = [f for f in left.split() if f.startswith("halo-") or f.endswith((".sh", ".env"))]
        assert ours == [] and "ray-token" not in left.split()
        assert "halo-" not in user(lab, name, "podman ps -a --format '{{.Names}}'")
        assert user(lab, name, "systemctl --user is-active halo-ray", check=False).strip() in (
            "inactive",
            "unknown",
        )

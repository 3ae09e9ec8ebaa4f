"""Image, toolbox, cluster user, RDMA settings and head-to-worker SSH on the lab."""

from __future__ import annotations

import pytest

from halo_cluster.config.loader import load_cluster
from halo_cluster.node import toolbox
from halo_cluster.node.facts import as_user
from lab import cli
from tests.e2e.conftest import Lab

USER_ENV = as_user("vllm", "")
TOOLBOX = "vllm-therock-gfx1151"


@pytest.fixture
def lab(converged: Lab) -> Lab:
    return converged


def test_preflight_reports_hardware_as_not_verified(lab: Lab) -> None:
    result = lab.deploy()
    output = result.stdout + result.stderr
    for check in ("CPU", "iGPU carve-out", "memory", "E810", "E810 firmware", "RDMA device"):
        for name in lab.nodes:
            line = f"[{name}] preflight {check}: NOT VERIFIED (systemd-nspawn container"
            assert line in output
    assert "preflight CPU: OK" not in output


def pinned() -> str:
    """The cluster's image, `NAME@sha256:...`, as the lab's lock records it."""
    return load_cluster(cli.CONFIG).container.pinned


def test_image_pulled_through_the_lab_registry_as_the_cluster_user(lab: Lab) -> None:
    images = lab.ssh(
        "node1",
        f"{USER_ENV} podman images --digests --format '{{{{.Repository}}}}@{{{{.Digest}}}}'",
    )
    assert pinned() in images.split()  # by the cluster's digest, not the tag (issue 25)
    assert lab.ssh("node1", "podman images -q").strip() == "", "root's storage stays empty"


def test_toolbox_has_exactly_the_expected_options(lab: Lab) -> None:
    image_id = lab.ssh(
        "node1",
        f"{USER_ENV} podman image inspect --format '{{{{.Id}}}}' {pinned()}",
    ).strip()
    recorded = lab.ssh("node1", f"cat ~vllm/.local/state/halo-cluster/toolbox-{TOOLBOX}").strip()
    # no /dev/infiniband in the lab: the RDMA options are left out, as upstream does
    assert recorded == toolbox.record(image_id, toolbox.options(False))
    made_from = lab.ssh(
        "node1", f"{USER_ENV} podman container inspect --format '{{{{.Image}}}}' {TOOLBOX}"
    ).strip()
    assert made_from == image_id


def test_toolbox_sees_the_gpu_device_nodes(lab: Lab) -> None:
    out = lab.ssh(
        "node1",
        f"{USER_ENV} toolbox run -c {TOOLBOX} sh -c 'ls /dev/dri/renderD128 /dev/kfd; id -un'",
    )
    assert out.split() == ["/dev/dri/renderD128", "/dev/kfd", "vllm"]


def test_rerun_keeps_the_same_toolbox(lab: Lab) -> None:
    before = lab.ssh(
        "node1", f"{USER_ENV} podman container inspect --format '{{{{.Id}}}}' {TOOLBOX}"
    )
    result = lab.deploy_json()
    assert not [op for op in result["results"]["operations"] if op["success"]]
    after = lab.ssh(
        "node1", f"{USER_ENV} podman container inspect --format '{{{{.Id}}}}' {TOOLBOX}"
    )
    assert before == after


def test_cluster_user_groups_and_memlock_settings(lab: Lab) -> None:
    groups = lab.ssh("node1", "id -nG vllm").split()
    assert {"render", "video"} <= set(groups)
    limits = lab.ssh("node1", "cat /etc/security/limits.d/90-halo-memlock.conf")
    assert "vllm hard memlock unlimited" in limits
    for scope in ("system", "user"):
        dropin = lab.ssh("node1", f"cat /etc/systemd/{scope}.conf.d/90-halo-memlock-default.conf")
        assert "DefaultLimitMEMLOCK=infinity" in dropin
    assert lab.ssh("node1", "cat /etc/modules-load.d/halo-rdma.conf").split()[-2:] == [
        "ice",
        "irdma",
    ]


def test_head_reaches_each_worker_over_the_data_link(lab: Lab) -> None:
    out = lab.ssh(
        "node1",
        "runuser -u vllm -- ssh -o BatchMode=yes -o StrictHostKeyChecking=yes "
        "-o UpdateHostKeys=no 192.168.100.2 'hostname; echo $SSH_CONNECTION'",
    )
    hostname, connection = out.splitlines()
    assert hostname == "node2"
    assert connection.split()[0] == "192.168.100.1" and connection.split()[2] == "192.168.100.2"
    key = lab.ssh("node1", "cat ~vllm/.ssh/id_ed25519.pub").strip()
    assert key in lab.ssh("node2", "cat ~vllm/.ssh/authorized_keys").splitlines()
    assert lab.ssh("node2", "test -e ~vllm/.ssh/id_ed25519 || echo absent").strip() == "absent"


def test_launcher_defaults_in_login_shells(lab: Lab) -> None:
    env = lab.ssh("node2", "su - vllm -c 'env' | grep -E '^(VLLM|NCCL|GLOO)_' | sort")
    assert "VLLM_HEAD_IP=192.168.100.1" in env.splitlines()
    assert "NCCL_SOCKET_IFNAME=enp1s0f0np0" in env.splitlines()
    assert "VLLM_REMOTE_TOOLBOX=vllm-therock-gfx1151" in env.splitlines()

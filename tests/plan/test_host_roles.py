"""RDMA host settings, the cluster user, image and toolbox, launcher defaults and head-to-worker
SSH, planned on recorded real outputs."""

from __future__ import annotations

from halo_cluster.node import toolbox
from tests.plan.nodes import (
    HOST_KEY,
    IMAGE_ID,
    PINNED,
    containers,
    node,
    plan_pair,
    strix_halo_hardware,
)

HEAD_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHeadUserKeyForThePlanTest halo-cluster"
OLD_ID = "5f1e0e1a0d9c8b7a6f5e4d3c2b1a09f8e7d6c5b4a39281706f5e4d3c2b1a0918"


def op_names(result, host: str) -> list[str]:
    return result.names(host)


def test_roce_host_settings() -> None:
    uploads = plan_pair().uploads("halo1")
    assert uploads["/etc/modules-load.d/halo-rdma.conf"].splitlines()[-2:] == ["ice", "irdma"]
    limits = uploads["/etc/security/limits.d/90-halo-memlock.conf"].splitlines()
    assert limits[-2:] == ["vllm soft memlock unlimited", "vllm hard memlock unlimited"]
    for scope in ("system", "user"):
        dropin = uploads[f"/etc/systemd/{scope}.conf.d/90-halo-memlock-default.conf"]
        assert "[Manager]\nDefaultLimitMEMLOCK=infinity\n" in dropin


def test_drivers_loaded_now_only_when_the_e810_is_there_and_they_are_not() -> None:
    loaded = plan_pair()
    assert "RDMA host settings | Load the E810 drivers now" not in op_names(loaded, "halo1")
    unloaded = [line for line in strix_halo_hardware() if not line.startswith("module")]
    result = plan_pair(head=node(hardware=unloaded))
    assert "RDMA host settings | Load the E810 drivers now" in op_names(result, "halo1")
    assert "modprobe ice && modprobe irdma" in result.commands("halo1")


def test_thunderbolt_gets_no_rdma_pieces() -> None:
    result = plan_pair(interconnect="thunderbolt")
    uploads = result.uploads("halo1")
    assert not [p for p in uploads if "memlock" in p or "halo-rdma" in p]
    user_op = next(c for c in result.commands("halo1") if c.startswith("useradd"))
    assert "render,video" in user_op and "rdma" not in user_op


def test_cluster_user_created_in_device_groups_and_lingering() -> None:
    result = plan_pair()
    useradd = next(c for c in result.commands("halo1") if c.startswith("useradd"))
    assert "-G render,video,rdma" in useradd and useradd.endswith("vllm")
    assert any(c.startswith("loginctl enable-linger vllm") for c in result.commands("halo1"))


def toolbox_script(result, host: str = "halo1") -> str | None:
    return next((c for c in result.commands(host) if "toolbox create" in c), None)


def test_image_pulled_as_the_user_when_missing() -> None:
    result = plan_pair()
    pull = next(c for c in result.commands("halo1") if "podman pull" in c)
    assert "runuser -u vllm --" in pull
    assert f"podman pull --quiet {PINNED}" in pull  # the cluster's digest, not the tag (issue 25)


def test_toolbox_options_follow_dev_infiniband() -> None:
    with_ib = toolbox_script(plan_pair())
    assert (
        "-- --device /dev/dri --device /dev/kfd --group-add keep-groups --security-opt "
        "seccomp=unconfined --device /dev/infiniband --ulimit memlock=-1"
    ) in with_ib
    no_ib = [line for line in strix_halo_hardware() if line != "infiniband"]
    without = toolbox_script(plan_pair(head=node(hardware=no_ib)))
    assert "seccomp=unconfined" in without and "/dev/infiniband" not in without
    assert "memlock" not in without


def test_present_image_and_current_toolbox_are_kept() -> None:
    options = toolbox.options(True)
    result = plan_pair(head=node(user_files=containers(IMAGE_ID, IMAGE_ID, options)))
    assert not any("podman pull" in c for c in result.commands("halo1"))
    assert toolbox_script(result) is None


def test_toolbox_recreated_when_its_image_or_options_changed() -> None:
    options = toolbox.options(True)
    old_image = plan_pair(head=node(user_files=containers(IMAGE_ID, OLD_ID, options)))
    script = toolbox_script(old_image)
    assert "toolbox rm --force vllm-therock-gfx1151" in script
    assert "podman rmi" not in script  # the image it was made from stays (issue 25)
    other_options = plan_pair(head=node(user_files=containers(IMAGE_ID, IMAGE_ID, options[:4])))
    assert toolbox_script(other_options) is not None


def test_image_update_keeps_the_cluster_digest() -> None:
    """issue 25: a deploy never moves the cluster to another build, image_update or not."""
    options = toolbox.options(True)
    result = plan_pair(
        "image_update: true\n", head=node(user_files=containers(IMAGE_ID, IMAGE_ID, options))
    )
    assert not any("podman pull" in c for c in result.commands("halo1"))
    assert toolbox_script(result) is None


def test_digest_pin_is_pulled_by_digest() -> None:
    pinned = f"docker.io/kyuz0/vllm-therock-gfx1151@sha256:{IMAGE_ID}"
    result = plan_pair(f"image: {pinned}\n")
    assert any(f"podman pull --quiet {pinned}" in c for c in result.commands("halo1"))


def test_launcher_environment_roce() -> None:
    env = plan_pair().uploads("halo2")["/etc/halo-cluster/cluster.env"]
    for line in (
        "VLLM_HEAD_IP=192.168.100.1",
        "VLLM_WORKER_IP=192.168.100.2",
        "VLLM_REMOTE_TOOLBOX=vllm-therock-gfx1151",
        "VLLM_HOST_IP=192.168.100.2",
        "NCCL_SOCKET_IFNAME=enp194s0np0",
        "GLOO_SOCKET_IFNAME=enp194s0np0",
        "NCCL_IB_GID_INDEX=1",
        # the device's name now and after rdma-core's rename at the next boot
        "NCCL_IB_HCA==irdma1:1,rocep194s0:1",
        "VLLM_ROCE_HCA==irdma1:1,rocep194s0:1",  # the launcher exports it as NCCL_IB_HCA
    ):
        assert f"\n{line}\n" in env, line
    assert "NCCL_IB_DISABLE" not in env


def test_launcher_environment_thunderbolt() -> None:
    env = plan_pair(interconnect="thunderbolt").uploads("halo1")["/etc/halo-cluster/cluster.env"]
    assert "\nNCCL_IB_DISABLE=1\n" in env
    assert "\nNCCL_SOCKET_IFNAME=thunderbolt0\n" in env
    assert "NCCL_IB_GID_INDEX" not in env


def test_head_key_made_on_the_head_and_worker_host_keys_pinned() -> None:
    result = plan_pair()
    head_ops = op_names(result, "halo1")
    assert "Launcher | SSH key of vllm (made here, never copied)" in head_ops
    keygen = next(c for c in result.commands("halo1") if "ssh-keygen" in c)
    assert "runuser -u vllm" in keygen
    known = result.uploads("halo1")["/home/vllm/.ssh/known_hosts"]
    assert f"\n192.168.100.2 {HOST_KEY}\n" in known
    assert "ssh-keygen" not in " ".join(result.commands("halo2"))


# what OpenSSH's UpdateHostKeys appends after the first head-to-worker SSH: the worker's other host
# keys, hashed (HashKnownHosts), at the end of the file, after our block
UPDATED_HOST_KEYS = (
    "|1|F1E1KeyHashSalt0000000000000=|Hx7cQjX8bN3Xh2VbZy3tRk0aW6E= ecdsa-sha2-nistp256 AAAAE2V\n"
    "|1|R5aRsaHashSalt00000000000000=|Lk2pUf3hA8eWq1Yv0nPcGm5sT9A= ssh-rsa AAAAB3NzaC1yc2EAAAAD\n"
)


def head_known_hosts(lines: str) -> dict:
    """The head's cluster user with a key and this known_hosts (0600, as the deploy writes it)."""
    files = {".ssh/id_ed25519.pub": HEAD_KEY + "\n", ".ssh/known_hosts": (lines, "600")}
    return node(user_files=files)


def test_host_keys_appended_after_our_block_are_no_drift() -> None:
    pinned = plan_pair().uploads("halo1")["/home/vllm/.ssh/known_hosts"]
    result = plan_pair(head=head_known_hosts(pinned + UPDATED_HOST_KEYS))
    assert "/home/vllm/.ssh/known_hosts" not in result.uploads("halo1")
    assert not any("known_hosts" in c for c in result.commands("halo1"))


def test_a_changed_pinned_key_leaves_the_lines_around_our_block_where_they_are() -> None:
    old = "# BEGIN halo-cluster (managed, do not edit)\n192.168.100.2 ssh-ed25519 OLD\n"
    user = "10.0.0.5 ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIUsersOwnHost\n"
    text = user + old + "# END halo-cluster\n" + UPDATED_HOST_KEYS
    known = plan_pair(head=head_known_hosts(text)).uploads("halo1")["/home/vllm/.ssh/known_hosts"]
    assert known == (
        user + "# BEGIN halo-cluster (managed, do not edit)\n"
        f"192.168.100.2 {HOST_KEY}\n# END halo-cluster\n" + UPDATED_HOST_KEYS
    )


def test_worker_authorizes_the_head_key_read_at_run_time_on_a_fresh_cluster() -> None:
    launcher = [op for op in plan_pair().ops["halo2"] if op.name.startswith("Launcher | ")]
    assert launcher[-1].commands[-1].startswith("FunctionCommand(_authorize_from")


def test_worker_authorizes_a_known_head_key_once() -> None:
    head_key = {".ssh/id_ed25519.pub": HEAD_KEY + "\n"}
    fresh = plan_pair(head=node(user_files=head_key))
    command = next(c for c in fresh.commands("halo2") if "authorized_keys" in c)
    assert HEAD_KEY in command and "grep -qxF" in command
    authorized = {".ssh/authorized_keys": f"other\n{HEAD_KEY}\n"}
    done = plan_pair(head=node(user_files=head_key), worker=node(user_files=authorized))
    assert not any("authorized_keys" in c for c in done.commands("halo2"))

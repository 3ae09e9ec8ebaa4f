"""The toolbox's options and the record that tells whether it must be recreated."""

from __future__ import annotations

GPU_DEVICES = ("/dev/dri", "/dev/kfd")
BASE_OPTIONS = (
    "--device",
    "/dev/dri",
    "--device",
    "/dev/kfd",
    "--group-add",
    "keep-groups",
    "--security-opt",
    "seccomp=unconfined",
)
RDMA_OPTIONS = ("--device", "/dev/infiniband", "--ulimit", "memlock=-1")
STATE_DIR = ".local/state/halo-cluster"


def options(has_infiniband: bool) -> list[str]:
    """The options upstream refresh_toolbox.sh passes: RDMA ones only where /dev/infiniband is."""
    return list(BASE_OPTIONS + (RDMA_OPTIONS if has_infiniband else ()))


def state_file(toolbox: str) -> str:
    """Relative to the cluster user's home."""
    return f"{STATE_DIR}/toolbox-{toolbox}"


def record(image_id: str, toolbox_options: list[str]) -> str:
    """What the state file holds for a toolbox made from `image_id` with these options."""
    return f"{image_id} {' '.join(toolbox_options)}"

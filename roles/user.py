"""The cluster user: present, in the groups that own the GPU and RDMA devices, lingering."""

from pyinfra import host
from pyinfra.api import deploy
from pyinfra.facts.files import File
from pyinfra.facts.server import Groups
from pyinfra.operations import server

DEFAULTS = {"halo_cluster_user": "vllm", "halo_interconnect": "roce"}
DEVICE_GROUPS = {
    "render": "/dev/dri/renderD*, /dev/kfd",
    "video": "/dev/dri/card*",
    "rdma": "/dev/infiniband/*",
}


def wanted_groups() -> list[str]:
    """render and video always (the iGPU); rdma for RoCE; only those the node has."""
    names = ["render", "video"] + (["rdma"] if host.data.halo_interconnect == "roce" else [])
    present = set(host.get_fact(Groups))
    return [name for name in names if name in present]


@deploy("Cluster user", data_defaults=DEFAULTS)
def cluster_user() -> None:
    user = host.data.halo_cluster_user
    # toolbox's keep-groups needs the user in the device groups on the host itself
    server.user(
        name=f"User {user} in {', '.join(wanted_groups()) or 'no device groups'}",
        user=user,
        groups=wanted_groups(),
        append=True,
        create_home=True,
        shell="/bin/bash",
    )
    # rootless podman and toolbox need the user's systemd session even without a login
    if not host.get_fact(File, path=f"/var/lib/systemd/linger/{user}"):
        server.shell(
            name=f"Keep {user}'s systemd user session running (linger)",
            commands=[
                f"loginctl enable-linger {user} && systemctl start user@$(id -u {user}).service"
            ],
        )

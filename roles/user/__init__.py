"""The cluster user: present, in the groups that own the GPU and RDMA devices, lingering."""

import shlex

from pyinfra import host
from pyinfra.api import deploy
from pyinfra.operations import server

from halo_cluster.node.context import NodeContext
from halo_cluster.node.groups import device_groups
from halo_cluster.node.nodefiles import node_files

ORDER = 40
PACKAGES = ()
LINGER = "/var/lib/systemd/linger"


def paths(data) -> tuple[str, ...]:
    return (f"{LINGER}/{data.halo_cluster_user}",)


@deploy("Cluster user")
def apply(node: NodeContext) -> None:
    user = host.data.halo_cluster_user
    files = node_files(host)
    groups = files.groups()
    # toolbox's keep-groups needs the user in the device groups on the host itself
    wanted = [g for g in device_groups(host.data.halo_interconnect) if g in groups]
    q = shlex.quote(user)
    if files.home(user) is None:
        in_groups = f" -G {','.join(wanted)}" if wanted else ""
        server.shell(
            name=f"Create user {user}", commands=[f"useradd -m -s /bin/bash{in_groups} {q}"]
        )
    else:
        missing = [g for g in wanted if user not in groups[g]]
        if missing:
            server.shell(
                name=f"Add {user} to {', '.join(missing)}",
                commands=[f"usermod -a -G {','.join(missing)} {q}"],
            )
    # rootless podman and toolbox need the user's systemd session even without a login
    if not files.exists(f"{LINGER}/{user}"):
        server.shell(
            name=f"Keep {user}'s systemd user session running (linger)",
            commands=[f"loginctl enable-linger {q} && systemctl start user@$(id -u {q})"],
        )

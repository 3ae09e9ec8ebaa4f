"""The cluster user: present, in the groups that own the GPU and RDMA devices, lingering, with
the subordinate uid and gid ranges rootless podman needs (judged before anything changes)."""

import shlex
from typing import Any

from pyinfra import host
from pyinfra.api import deploy
from pyinfra.operations import server

from halo_cluster.decide.preflight import Check
from halo_cluster.node.context import NodeContext
from halo_cluster.node.groups import device_groups
from halo_cluster.node.nodefiles import cached, node_files
from halo_cluster.roles.user import subids
from halo_cluster.roles.user.facts import UserAccount

ORDER = 40
PACKAGES = ()
LINGER = "/var/lib/systemd/linger"


def paths(data) -> tuple[str, ...]:
    return (f"{LINGER}/{data.halo_cluster_user}", subids.SUBUID, subids.SUBGID, subids.NSSWITCH)


def reads(data) -> tuple[tuple[type, dict], ...]:
    return ((UserAccount, {"user": data.halo_cluster_user}),)


def preflight(node_host: Any, node: Any) -> list[Check]:
    """An existing cluster user without subordinate ranges refuses the node: its image pull
    would fail halfway through the deploy (`node`, the hook's context, is unread here)."""
    user = node_host.data.halo_cluster_user
    files = node_files(node_host)
    account = cached(node_host, UserAccount, user=user)
    local = files.home(user) is not None
    uid = account["uid"] if account else _local_uid(files.text("/etc/passwd"), user)
    texts = {path: files.text(path) for path in (subids.SUBUID, subids.SUBGID, subids.NSSWITCH)}
    return [subids.check(user, uid, local, local or account is not None, texts)]


def _local_uid(passwd: str | None, user: str) -> int | None:
    for line in (passwd or "").splitlines():
        fields = line.split(":")
        if fields[0] == user and len(fields) > 2 and fields[2].isdigit():
            return int(fields[2])
    return None


@deploy("Cluster user")
def apply(node: NodeContext) -> None:
    user = host.data.halo_cluster_user
    files = node_files(host)
    groups = files.groups()
    # toolbox's keep-groups needs the user in the device groups on the host itself
    wanted = [g for g in device_groups(host.data.halo_interconnect) if g in groups]
    q = shlex.quote(user)
    local = files.home(user) is not None
    if not local and cached(host, UserAccount, user=user) is None:
        in_groups = f" -G {','.join(wanted)}" if wanted else ""
        server.shell(
            name=f"Create user {user}", commands=[f"useradd -m -s /bin/bash{in_groups} {q}"]
        )
    else:
        missing = [g for g in wanted if user not in groups[g]]
        if missing and local:
            server.shell(
                name=f"Add {user} to {', '.join(missing)}",
                commands=[f"usermod -a -G {','.join(missing)} {q}"],
            )
        elif missing:  # SSSD or LDAP: usermod edits only /etc/passwd's users, gpasswd /etc/group
            server.shell(
                name=f"Add {user} (SSSD or LDAP) to {', '.join(missing)} in /etc/group",
                commands=[f"gpasswd -a {q} {shlex.quote(g)}" for g in missing],
            )
    # rootless podman and toolbox need the user's systemd session even without a login
    if not files.exists(f"{LINGER}/{user}"):
        server.shell(
            name=f"Keep {user}'s systemd user session running (linger)",
            commands=[f"loginctl enable-linger {q} && systemctl start user@$(id -u {q})"],
        )

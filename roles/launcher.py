"""What the cluster launcher needs: its defaults in the environment, and passwordless SSH from the
head's cluster user to every worker over the data link, with pinned host keys."""

from pyinfra import host, logger, state
from pyinfra.api import deploy
from pyinfra.facts.server import Users

from halo_cluster.blocks import with_block
from halo_cluster.facts import TextFiles
from halo_cluster.operations import authorize_key, text_file, user_ssh_key
from halo_cluster.render import render

ENV_FILE = "/etc/halo-cluster/cluster.env"
PROFILE = "/etc/profile.d/halo-cluster.sh"
HOST_KEY = "/etc/ssh/ssh_host_ed25519_key.pub"
DEFAULTS = {
    "halo_cluster_user": "vllm",
    "halo_role": "worker",
    "halo_toolbox": "vllm-therock-gfx1151",
}


@deploy("Launcher", data_defaults=DEFAULTS)
def launcher(interface: str | None, hca: str | None) -> None:
    """`interface`: the data interface; `hca`: its RDMA device, pinned for RCCL when known."""
    current = host.get_fact(TextFiles, paths=(ENV_FILE, PROFILE))
    env = render(
        "cluster.env.j2",
        node=host.data.halo_node,
        role=host.data.halo_role,
        head_ip=host.data.halo_head_address,
        worker_ips=host.data.halo_worker_addresses,
        toolbox=host.data.halo_toolbox,
        node_ip=host.data.halo_data_address,
        interface=interface or host.data.halo_data_interface,
        interconnect=host.data.halo_interconnect,
        hca=hca,
    )
    for path, text in ((ENV_FILE, env), (PROFILE, render("halo-cluster.sh.j2"))):
        present = current.get(path)
        text_file(
            name=f"Launcher defaults in {path}",
            path=path,
            text=text,
            current=present.text if present else None,
        )
    if host.data.halo_role == "head":
        _head_reaches_workers()
    else:
        _worker_admits_head()


def node_host(name: str):
    """The inventory host of a node, or None when it is unreachable in this run."""
    found = next(h for h in state.inventory if h.data.get("halo_node") == name)
    return found if found in state.active_hosts else None


def head_name() -> str:
    return next(h.data.halo_node for h in state.inventory if h.data.get("halo_role") == "head")


def home_of(node, user: str) -> str:
    return node.get_fact(Users).get(user, {}).get("home") or f"/home/{user}"


def public_key(node, user: str) -> str | None:
    path = f"{home_of(node, user)}/.ssh/id_ed25519.pub"
    found = node.get_fact(TextFiles, paths=(path,)).get(path)
    return found.text.strip() if found and found.text.strip() else None


def _head_reaches_workers() -> None:
    user = host.data.halo_cluster_user
    if public_key(host, user) is None:
        user_ssh_key(name=f"SSH key of {user} (made here, never copied)", user=user)
    # the workers' host keys as the deploy read them over its own pinned connection
    lines = []
    for name, address in sorted(host.data.halo_peers.items()):
        peer = node_host(name)
        if peer is None:
            logger.warning(f"{host.print_prefix}{name} unreachable: its host key is left as it is")
            return
        key = peer.get_fact(TextFiles, paths=(HOST_KEY,)).get(HOST_KEY)
        if key:
            lines.append(f"{address} {' '.join(key.text.split()[:2])}")
    path = f"{home_of(host, user)}/.ssh/known_hosts"
    present = host.get_fact(TextFiles, paths=(path,)).get(path)
    text_file(
        name=f"Workers' host keys in {path}",
        path=path,
        text=with_block(present.text if present else None, lines),
        current=present.text if present else None,
        mode="600",
        owner=user,
    )


def _worker_admits_head() -> None:
    user = host.data.halo_cluster_user
    head = head_name()
    if node_host(head) is None:
        logger.warning(f"{host.print_prefix}head {head} unreachable: its key is authorized later")
        return
    key = public_key(node_host(head), user)
    path = f"{home_of(host, user)}/.ssh/authorized_keys"
    present = host.get_fact(TextFiles, paths=(path,)).get(path)
    if key is None or key not in (present.text.splitlines() if present else []):
        authorize_key(
            name=f"{user} on {head} may log in as {user}", user=user, key=key, from_host=head
        )

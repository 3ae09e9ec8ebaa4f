"""What the cluster launcher needs: its defaults in the environment, and passwordless SSH from the
head's cluster user to every worker over the data link, with pinned host keys."""

from pyinfra import host, logger, state
from pyinfra.api import deploy

from halo_cluster.blocks import with_block
from halo_cluster.nodefiles import ENV_FILE, HOST_KEY, PROFILE, node_files
from halo_cluster.operations import authorize_key, text_file, user_ssh_key
from halo_cluster.render import render

DEFAULTS = {
    "halo_cluster_user": "vllm",
    "halo_role": "worker",
    "halo_toolbox": "vllm-therock-gfx1151",
}
PUBLIC_KEY = ".ssh/id_ed25519.pub"


@deploy("Launcher", data_defaults=DEFAULTS)
def launcher(interface: str | None, hca: str | None) -> None:
    """`interface`: the data interface; `hca`: its RDMA device, pinned for RCCL when known."""
    files = node_files(host)
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
        text_file(
            name=f"Launcher defaults in {path}", path=path, text=text, current=files.text(path)
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


def _head_reaches_workers() -> None:
    user = host.data.halo_cluster_user
    files = node_files(host)
    if not (files.user_file(user, PUBLIC_KEY) or "").strip():
        user_ssh_key(name=f"SSH key of {user} (made here, never copied)", user=user)
    # the workers' host keys as the deploy read them over its own pinned connection
    lines = []
    for name, address in sorted(host.data.halo_peers.items()):
        peer = node_host(name)
        if peer is None:
            logger.warning(f"{host.print_prefix}{name} unreachable: its host key is left as it is")
            return
        key = node_files(peer).text(HOST_KEY)
        if key:
            lines.append(f"{address} {' '.join(key.split()[:2])}")
    path = f"{files.home(user) or f'/home/{user}'}/.ssh/known_hosts"
    present = files.text(path)
    text_file(
        name=f"Workers' host keys in {path}",
        path=path,
        text=with_block(present, lines),
        current=present,
        mode="600",
        owner=user,
    )


def _worker_admits_head() -> None:
    user = host.data.halo_cluster_user
    head = head_name()
    head_host = node_host(head)
    if head_host is None:
        logger.warning(f"{host.print_prefix}head {head} unreachable: its key is authorized later")
        return
    key = (node_files(head_host).user_file(user, PUBLIC_KEY) or "").strip() or None
    authorized = (node_files(host).user_file(user, ".ssh/authorized_keys") or "").splitlines()
    if key is None or key not in authorized:
        authorize_key(
            name=f"{user} on {head} may log in as {user}", user=user, key=key, from_host=head
        )

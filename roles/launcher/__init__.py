"""What the cluster launcher needs: its defaults in the environment, and passwordless SSH from the
head's cluster user to every worker over the data link, with pinned host keys."""

from pyinfra import host, logger, state
from pyinfra.api import deploy

from halo_cluster.node.context import NodeContext
from halo_cluster.node.environment import environment_values
from halo_cluster.node.nodefiles import node_files
from halo_cluster.node.operations import text_file
from halo_cluster.node.pyinfra_internals import active
from halo_cluster.node.render import templates
from halo_cluster.roles.launcher.blocks import block_lines, with_block
from halo_cluster.roles.launcher.operations import authorize_key, user_ssh_key

render = templates(__name__)  # templates/launcher/

ORDER = 70
PACKAGES = ()
ENV_FILE = "/etc/halo-cluster/cluster.env"
PROFILE = "/etc/profile.d/halo-cluster.sh"
HOST_KEY = "/etc/ssh/ssh_host_ed25519_key.pub"
PUBLIC_KEY = ".ssh/id_ed25519.pub"


def paths(data) -> tuple[str, ...]:
    home = f"~{data.halo_cluster_user}"
    return (
        ENV_FILE,
        PROFILE,
        HOST_KEY,
        f"{home}/{PUBLIC_KEY}",
        f"{home}/.ssh/authorized_keys",
        f"{home}/.ssh/known_hosts",
    )


@deploy("Launcher")
def apply(node: NodeContext) -> None:
    """Launcher defaults: the data interface, and its RDMA device pinned for RCCL when known."""
    env = render("cluster.env.j2", **environment_values(node))
    for path, text in ((ENV_FILE, env), (PROFILE, render("halo-cluster.sh.j2"))):
        text_file(name=f"Launcher defaults in {path}", path=path, text=text)
    if host.data.halo_role == "head":
        _head_reaches_workers()
    else:
        _worker_admits_head()


def node_host(name: str):
    """The inventory host of a node, or None when it is unreachable in this run."""
    found = next(h for h in state.inventory if h.data.get("halo_node") == name)
    return found if active(found) else None


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
    # a node that left keeps its pinned key: the serve role logs in there to take it out
    departed = set(host.data.halo_container_left.values())
    lines += [line for line in block_lines(files.text(path)) if line.partition(" ")[0] in departed]
    text_file(
        name=f"Workers' host keys in {path}",
        path=path,
        text=with_block(files.text(path), lines),
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

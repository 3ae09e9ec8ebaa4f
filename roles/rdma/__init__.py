"""RDMA host settings (roce only): E810 drivers at boot, unlimited locked memory."""

from pyinfra import host
from pyinfra.api import deploy
from pyinfra.operations import server

from halo_cluster.decide.safety import e810_ports
from halo_cluster.node.context import NodeContext
from halo_cluster.node.operations import text_file
from halo_cluster.node.render import templates

render = templates(__name__)  # templates/rdma/

ORDER = 50
PACKAGES = ()
RDMA_MODULES = "/etc/modules-load.d/halo-rdma.conf"
MEMLOCK_LIMITS = "/etc/security/limits.d/90-halo-memlock.conf"
MEMLOCK_DROP_INS = (
    "/etc/systemd/system.conf.d/90-halo-memlock-default.conf",
    "/etc/systemd/user.conf.d/90-halo-memlock-default.conf",
)


def paths(data) -> tuple[str, ...]:
    return (RDMA_MODULES, MEMLOCK_LIMITS, *MEMLOCK_DROP_INS)


@deploy("RDMA host settings")
def apply(node: NodeContext) -> None:
    if host.data.halo_interconnect != "roce":
        return
    wanted = {
        RDMA_MODULES: render("halo-rdma.conf.j2"),
        MEMLOCK_LIMITS: render("90-halo-memlock.conf.j2", user=host.data.halo_cluster_user),
        **{path: render("90-halo-memlock-default.conf.j2") for path in MEMLOCK_DROP_INS},
    }
    for path, text in wanted.items():
        text_file(name=f"{path}", path=path, text=text)
    # listed for boot regardless; loaded now only where an E810 is there to drive
    if e810_ports(node.interfaces) and not {"ice", "irdma"} <= set(node.loaded_modules):
        server.shell(name="Load the E810 drivers now", commands=["modprobe ice && modprobe irdma"])

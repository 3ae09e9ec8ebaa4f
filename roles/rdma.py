"""RDMA host settings (roce only): E810 drivers at boot, unlimited locked memory."""

from pyinfra import host
from pyinfra.api import deploy
from pyinfra.operations import server

from halo_cluster.facts import Hardware, TextFiles
from halo_cluster.operations import text_file
from halo_cluster.render import render

MODULES = "/etc/modules-load.d/halo-rdma.conf"
LIMITS = "/etc/security/limits.d/90-halo-memlock.conf"
SYSTEMD_DROP_INS = (
    "/etc/systemd/system.conf.d/90-halo-memlock-default.conf",
    "/etc/systemd/user.conf.d/90-halo-memlock-default.conf",
)
DEFAULTS = {"halo_cluster_user": "vllm"}


@deploy("RDMA host settings", data_defaults=DEFAULTS)
def rdma_host(interface: str | None, e810_present: bool) -> None:
    """`e810_present`: load the drivers now too (they are listed for boot regardless)."""
    current = host.get_fact(TextFiles, paths=(MODULES, LIMITS, *SYSTEMD_DROP_INS))
    wanted = {
        MODULES: render("halo-rdma.conf.j2"),
        LIMITS: render("90-halo-memlock.conf.j2", user=host.data.halo_cluster_user),
        **{path: render("90-halo-memlock-default.conf.j2") for path in SYSTEMD_DROP_INS},
    }
    for path, text in wanted.items():
        present = current.get(path)
        text_file(name=f"{path}", path=path, text=text, current=present.text if present else None)
    modules = host.get_fact(Hardware, interface=interface)["modules"]
    if e810_present and not {"ice", "irdma"} <= set(modules):
        server.shell(name="Load the E810 drivers now", commands=["modprobe ice && modprobe irdma"])

"""RDMA host settings (roce only): E810 drivers at boot, unlimited locked memory."""

from pyinfra import host
from pyinfra.api import deploy
from pyinfra.operations import server

from halo_cluster.nodefiles import MEMLOCK_DROP_INS, MEMLOCK_LIMITS, RDMA_MODULES, node_files
from halo_cluster.operations import text_file
from halo_cluster.render import render

DEFAULTS = {"halo_cluster_user": "vllm"}


@deploy("RDMA host settings", data_defaults=DEFAULTS)
def rdma_host(e810_present: bool, modules_loaded: list[str]) -> None:
    """`e810_present`: load the drivers now too (they are listed for boot regardless)."""
    files = node_files(host)
    wanted = {
        RDMA_MODULES: render("halo-rdma.conf.j2"),
        MEMLOCK_LIMITS: render("90-halo-memlock.conf.j2", user=host.data.halo_cluster_user),
        **{path: render("90-halo-memlock-default.conf.j2") for path in MEMLOCK_DROP_INS},
    }
    for path, text in wanted.items():
        text_file(name=f"{path}", path=path, text=text, current=files.text(path))
    if e810_present and not {"ice", "irdma"} <= set(modules_loaded):
        server.shell(name="Load the E810 drivers now", commands=["modprobe ice && modprobe irdma"])

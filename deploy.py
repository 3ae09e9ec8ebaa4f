"""Converge every node: `pyinfra inventory.py deploy.py`.

Safety checks first: a node that fails them is refused with one line and nothing on it changes.
Then the preflight report (is this the hardware the guide assumes?), then the roles in order.
"""

import sys
from pathlib import Path

from pyinfra import host, logger

sys.path.insert(0, str(Path(__file__).resolve().parent))

from halo_cluster import preflight
from halo_cluster.facts import Hardware, NetworkInterfaces, SshSessionInterfaces
from halo_cluster.nodefiles import cached, node_files
from halo_cluster.operations import refuse
from halo_cluster.safety import check_node, e810_ports
from roles import container, kernel, launcher, network, packages, rdma, reboot, user

SELECTOR = ("halo_interconnect", "halo_data_interface", "halo_data_mac")
LOG = {
    preflight.OK: logger.info,
    preflight.NOT_VERIFIED: logger.info,
    preflight.WARN: logger.warning,
    preflight.FAIL: logger.error,
}

interfaces = cached(host, NetworkInterfaces)
verdict = check_node(
    {key: host.data.get(key) for key in SELECTOR},
    node_files(host).os_release(),
    interfaces,
    cached(host, SshSessionInterfaces, port=host.data.get("ssh_port") or 22),
)
for warning in verdict.warnings:
    logger.warning(f"{host.print_prefix}{warning}")

if verdict.problems:
    refuse(name="Safety checks", reason=verdict.problems[0])
else:
    hardware = cached(host, Hardware, interface=verdict.interface)
    for check in preflight.run(
        hardware, host.data.halo_interconnect, verdict.interface, interfaces
    ):
        LOG[check.status](f"{host.print_prefix}preflight {check.line()}")

    packages.packages()
    kernel.kernel_args()
    network.data_link(interface=verdict.interface)
    user.cluster_user()
    if host.data.halo_interconnect == "roce":
        rdma.rdma_host(
            e810_present=bool(e810_ports(interfaces)), modules_loaded=hardware["modules"]
        )
    container.image_and_toolbox(has_infiniband=hardware["infiniband"])
    launcher.launcher(interface=verdict.interface, hca=(hardware["rdma"] or [None])[0])
    reboot.reboot_if_needed()

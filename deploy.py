"""Converge every node: `pyinfra inventory.py deploy.py`.

Safety checks first: a node that fails them is refused with one line and nothing on it changes.
"""

import sys
from pathlib import Path

from pyinfra import host, logger

sys.path.insert(0, str(Path(__file__).resolve().parent))

from halo_cluster.facts import NetworkInterfaces, OsRelease, SshSessionInterfaces
from halo_cluster.operations import refuse
from halo_cluster.safety import check_node
from roles import kernel, network, packages, reboot

verdict = check_node(
    {
        key: host.data.get(key)
        for key in ("halo_interconnect", "halo_data_interface", "halo_data_mac")
    },
    host.get_fact(OsRelease),
    host.get_fact(NetworkInterfaces),
    host.get_fact(SshSessionInterfaces, port=host.data.get("ssh_port") or 22),
)
for warning in verdict.warnings:
    logger.warning(f"{host.print_prefix}{warning}")

if verdict.problems:
    refuse(name="Safety checks", reason=verdict.problems[0])
else:
    packages.packages()
    kernel.kernel_args()
    network.data_link(interface=verdict.interface)
    reboot.reboot_if_needed()

"""Converge every node: `pyinfra inventory.py deploy.py`.

Everything the deploy and the roles read from a node is read first, in one command per node
(`halo_cluster/node/reads.py`); a read that failed refuses the node with its fix. Safety checks
next: a node that fails them is refused with one line and nothing on it changes.
Then the preflight report (is this the hardware the guide assumes? are its kernel and firmware
versions known good?): a check that refuses (a known-bad kernel or firmware) refuses the node
before anything on it changes. Then every role in `roles/`, in its declared order.
"""

from pyinfra import host, logger

from halo_cluster import roles
from halo_cluster.decide import preflight
from halo_cluster.decide.safety import check_node
from halo_cluster.node import reads
from halo_cluster.node.context import NodeContext
from halo_cluster.node.deployreads import data_port_hardware, own_reads
from halo_cluster.node.facts import NetworkInterfaces, SshSessionInterfaces
from halo_cluster.node.memory import NodeMemory
from halo_cluster.node.nodefiles import cached, declare, node_files
from halo_cluster.node.report import record, refuse

SELECTOR = ("halo_interconnect", "halo_data_interface", "halo_data_mac", "halo_cluster_user")
LOG = {
    preflight.OK: logger.info,
    preflight.NOT_VERIFIED: logger.info,
    preflight.WARN: logger.warning,
    preflight.FAIL: logger.error,
}


def all_reads(data) -> tuple[tuple[type, dict], ...]:
    """The deploy's own reads (`node/deployreads.py`) and every role's."""
    return (*own_reads(data), *roles.declared_reads(data))


declare(roles.declared_paths)
reads.declare(all_reads)
reads.prefetch(host)  # one command: every fact below and in the roles comes from it
record(host, "reached")  # its facts were read: drift tells it from an unreachable node
unreadable = reads.unreadable(host)  # a read that failed: this node's refusal, with its fix
verdict = None
if unreadable is None:
    interfaces = cached(host, NetworkInterfaces)
    sessions = cached(host, SshSessionInterfaces, port=host.data.ssh_port)
    verdict = check_node(
        {key: host.data.get(key) for key in SELECTOR},
        node_files(host).os_release(),
        interfaces,
        sessions,
        node_files(host).text("/etc/passwd") or "",
    )
    for warning in verdict.warnings:
        logger.warning(f"{host.print_prefix}{warning}")

if verdict is None or verdict.problems:
    refuse(host, unreadable or verdict.problems[0])
else:
    node = NodeContext(
        interface=verdict.interface,
        interfaces=interfaces,
        hardware=data_port_hardware(host, verdict.interface),
        ssh_interfaces=tuple(dict.fromkeys(s["interface"] for s in sessions if s["interface"])),
        packages=roles.all_packages(),
        configured=host.data.halo_data_interface,
    )
    checks = preflight.run(
        node.hardware,
        host.data.halo_interconnect,
        verdict.interface,
        interfaces,
        host.data.halo_kernel_gtt_bytes,  # the kernel role's and the serve role's derivations
        host.data.halo_serve_object_store_reserved_mib,
        cached(host, NodeMemory)["memtotal_kib"],
    ) + roles.preflight_checks(host, node)
    for check in checks:
        LOG[check.status](f"{host.print_prefix}preflight {check.line()}")
    refusals = [check.detail for check in checks if check.refuses]
    if refusals:
        refuse(host, "; ".join(refusals))
    else:
        roles.apply_all(node)
        record(host, "planned")  # every role prepared: drift tells a full plan from a crashed one

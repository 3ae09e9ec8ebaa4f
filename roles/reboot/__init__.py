"""Reboot handling: report nodes whose running kernel lacks the wanted arguments; with
`reboot: if-needed` reboot them one at a time, workers first and the head last, and confirm."""

from pyinfra import host, logger
from pyinfra.api import deploy

from halo_cluster.decide import cmdline
from halo_cluster.decide.cmdline import PROC_CMDLINE
from halo_cluster.node.context import NodeContext
from halo_cluster.node.nodefiles import node_files
from halo_cluster.node.versions import running_kernel_args
from halo_cluster.roles.reboot.operations import assert_kernel_args_active, reboot_and_wait

ORDER = 90
PACKAGES = ()


def paths(data) -> tuple[str, ...]:
    return (PROC_CMDLINE,)


@deploy("Reboot")
def apply(node: NodeContext) -> None:
    missing = inactive_args()
    if not missing:
        return
    message = f"reboot required: kernel arguments not active: {' '.join(missing)}"
    if host.data.halo_reboot != "if-needed":
        logger.warning(f"{host.print_prefix}{message} (reboot: never)")
        return
    logger.warning(f"{host.print_prefix}{message}: rebooting (reboot: if-needed)")
    # Two call sites make two operations, so every worker reboots (one at a time) before the head.
    if host.data.halo_role == "worker":
        reboot_and_wait(
            name="Reboot worker for kernel arguments",
            _serial=True,
            timeout=host.data.halo_reboot_timeout,
        )
    if host.data.halo_role == "head":
        reboot_and_wait(
            name="Reboot head for kernel arguments", timeout=host.data.halo_reboot_timeout
        )
    # the node boots its default entry, the running kernel's (a kernel upgrade is upgrade --os')
    assert_kernel_args_active(
        name="Confirm the kernel arguments are active", args=running_kernel_args(host)[0]
    )


def inactive_args() -> list[str]:
    """Wanted arguments missing from the running kernel, and removed ones still present: for
    its release, as the kernel role wrote them into its entry."""
    running = node_files(host).text(PROC_CMDLINE) or ""
    return cmdline.missing_args(running, *running_kernel_args(host))

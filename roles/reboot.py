"""Reboot handling: report nodes whose running kernel lacks the wanted arguments; with
`reboot: if-needed` reboot them one at a time, workers first and the head last, and confirm."""

from pyinfra import host, logger
from pyinfra.api import deploy

from halo_cluster.operations import assert_kernel_args_active, reboot_and_wait
from roles.kernel import inactive_args

DEFAULTS = {"halo_reboot": "never", "halo_role": "worker", "halo_reboot_timeout": 600}


@deploy("Reboot", data_defaults=DEFAULTS)
def reboot_if_needed() -> None:
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
    assert_kernel_args_active(
        name="Confirm the kernel arguments are active", args=host.data.halo_kernel_args
    )

"""The reboot role's operations: reboot a node, wait for its new boot, confirm its kernel
arguments."""

from __future__ import annotations

import shlex
import time

from paramiko import SSHException
from pyinfra.api import FunctionCommand, OperationError, operation

from halo_cluster.node.boot import BOOTED, MARK, REBOOT, REBOOT_DELAY
from halo_cluster.node.progress import waiting


@operation(is_idempotent=False)
def reboot_and_wait(timeout: int, interval: float = 0.5):
    """
    Reboot the node and wait until it is back and has finished booting.

    + timeout: seconds to wait for the node to come back (the caller's `reboot_timeout`)
    + interval: seconds between reconnection attempts, the first one 2 s after the reboot (an
      attempt that reaches the old boot is told by the marker; a refused one costs nothing)

    A marker in /run (a tmpfs, empty after every boot) tells the new boot from the old one
    (halo_cluster/node/boot.py); uptime cannot, since containers report the host's.

    **Example:**

    .. code:: python

        reboot_and_wait(name="Reboot for kernel arguments", timeout=900)
    """
    yield MARK
    yield REBOOT
    yield FunctionCommand(_wait_for_new_boot, (timeout, interval), {})


def _wait_for_new_boot(state, host, timeout: int, interval: float) -> bool:
    # not before REBOOT has run: closing the session sooner could end it (logind's
    # KillUserProcesses for a sudo user)
    time.sleep(REBOOT_DELAY + 1)
    host.disconnect()
    with waiting(host, f"{host.name} to come back from the reboot (up to {timeout} s)"):
        return _reconnect_after_boot(host, timeout, interval)


def _reconnect_after_boot(host, timeout: int, interval: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        host.connect(show_errors=False)
        if host.connected:
            try:
                waited, _ = host.run_shell_command(BOOTED)
            except (SSHException, EOFError, OSError):  # the old boot going down under it
                waited = False
            if waited:
                return True
            host.disconnect()
        time.sleep(interval)
    raise OperationError(f"{host.name} did not come back within {timeout} s of the reboot")


@operation(is_idempotent=False)
def assert_kernel_args_active(args: list[str]):
    """
    Fail unless every argument is in /proc/cmdline (run after a reboot).

    + args: the wanted kernel arguments

    **Example:**

    .. code:: python

        assert_kernel_args_active(args=["iommu=pt", "pcie_aspm=off"])
    """
    checks = " ".join(shlex.quote(arg) for arg in args)
    yield (
        f"missing=; for a in {checks}; do tr ' ' '\\n' < /proc/cmdline | grep -qxF -- \"$a\" "
        '|| missing="$missing $a"; done; '
        '[ -z "$missing" ] || { echo "still not active after reboot:$missing" >&2; exit 1; }'
    )

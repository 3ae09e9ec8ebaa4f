"""Custom pyinfra operations: small generators that yield commands, nothing else."""

from __future__ import annotations

import difflib
import shlex
import time
from io import StringIO

from pyinfra import host, logger, state
from pyinfra.api import FileUploadCommand, FunctionCommand, OperationError, operation

BOOT_MARKER = "/run/halo-cluster/booted-before"
RESTORE_SELINUX_LABEL = "if command -v restorecon >/dev/null; then restorecon {path}; fi"


@operation()
def text_file(path: str, text: str, current: str | None, mode: str = "644"):
    """
    Make a root-owned text file hold exactly ``text``, atomically.

    + path: file on the node
    + text: wanted contents
    + current: contents read by a fact earlier in the run (None: the file is missing)
    + mode: octal permissions

    The upload goes to a temporary file renamed into place, so an interrupted run never leaves a
    half-written file; the SELinux label is restored (a file moved from /tmp keeps tmp_t, which
    NetworkManager and GRUB tools may not read). ``--diff`` shows the change.

    **Example:**

    .. code:: python

        text_file(name="Kernel arguments for new kernels", path="/etc/kernel/cmdline",
                  text="ro rhgb quiet iommu=pt\\n", current=None)
    """
    if current == text:
        host.noop(f"{path} is up to date")
        return
    if state.config.DIFF:
        verb = "create" if current is None else "modify"
        host.log(f"Will {verb} {path}", logger.info)
        for line in difflib.unified_diff(
            (current or "").splitlines(), text.splitlines(), path, path, lineterm="", n=1
        ):
            logger.info("  %s", line)
    quoted = shlex.quote(path)
    yield FileUploadCommand(StringIO(text), path, remote_temp_filename=host.get_temp_filename(path))
    yield f"chown root:root {quoted} && chmod {mode} {quoted}"
    yield RESTORE_SELINUX_LABEL.format(path=quoted)


@operation(is_idempotent=False)
def refuse(reason: str):
    """
    Stop this node with a one-line reason, before anything on it changed.

    + reason: what is wrong and what to do

    **Example:**

    .. code:: python

        refuse(name="Safety checks", reason="enp1s0f0np0 carries this SSH session")
    """
    logger.error(f"{host.print_prefix}refused: {reason}")
    yield f"echo {shlex.quote('halo-cluster refused: ' + reason)} >&2; exit 1"


@operation(is_idempotent=False)
def activate_connection(connection: str):
    """
    Load changed NetworkManager keyfiles and bring one connection up.

    + connection: the connection id

    **Example:**

    .. code:: python

        activate_connection(name="Activate the data link", connection="halo-data")
    """
    yield f"nmcli connection reload && nmcli connection up id {shlex.quote(connection)}"


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


@operation(is_idempotent=False)
def reboot_and_wait(timeout: int = 600, interval: float = 2.0):
    """
    Reboot the node and wait until it is back and has finished booting.

    + timeout: seconds to wait for the node to come back
    + interval: seconds between reconnection attempts

    A marker in /run (a tmpfs, empty after every boot) tells the new boot from the old one;
    uptime cannot, since containers report the host's.

    **Example:**

    .. code:: python

        reboot_and_wait(name="Reboot for kernel arguments", timeout=900)
    """
    yield f"mkdir -p {BOOT_MARKER.rsplit('/', 1)[0]} && touch {BOOT_MARKER}"
    yield "( sleep 1 && systemctl reboot ) </dev/null >/dev/null 2>&1 &"
    yield FunctionCommand(_wait_for_new_boot, (timeout, interval), {})


def _wait_for_new_boot(state, host, timeout: int, interval: float) -> bool:
    new_boot = f"test ! -e {BOOT_MARKER}"
    time.sleep(interval)
    host.disconnect()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        host.connect(show_errors=False)
        if host.connected:
            # is-system-running exits non-zero for "degraded": only the marker decides
            waited, _ = host.run_shell_command(
                f"{new_boot} && {{ systemctl is-system-running --wait >/dev/null; {new_boot}; }}"
            )
            if waited:
                return True
            host.disconnect()
        time.sleep(interval)
    raise OperationError(f"{host.name} did not come back within {timeout} s of the reboot")

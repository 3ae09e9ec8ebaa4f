"""Custom pyinfra operations: small generators that yield commands, nothing else."""

from __future__ import annotations

import difflib
import shlex
import time
from io import StringIO

from pyinfra import host, logger, state
from pyinfra.api import FileUploadCommand, FunctionCommand, OperationError, operation

from halo_cluster.node import toolbox as toolbox_files
from halo_cluster.node.facts import CONTAINER_IMAGE, IMAGE_ID, as_user
from halo_cluster.node.nodefiles import node_files
from halo_cluster.node.progress import waiting
from halo_cluster.node.report import record

BOOT_MARKER = "/run/halo-cluster/booted-before"
RESTORE_SELINUX_LABEL = "{{ ! command -v restorecon >/dev/null || restorecon -R {path}; }}"


@operation()
def text_file(
    path: str, text: str, mode: str | None = None, owner: str = "root", secret: bool = False
):
    """
    Make a text file hold exactly ``text`` with ``mode``, replacing it atomically.

    + path: file on the node; a role must declare it in its ``paths(data)`` (the snapshot)
    + text: wanted contents
    + mode: octal permissions; None keeps the present file's (644 for a new file)
    + owner: owning user (its primary group too); a missing folder is made as that user
    + secret: never show the contents: no diff in the log or in drift's report

    The current contents and mode come from the run's snapshot, read before any change. The text
    is uploaded to a hidden temporary file in the same directory (``.NAME.halo-new``: no tool that
    reads these directories takes it), which gets its owner, mode and SELinux label, and only then
    is renamed over the target: an interrupted run leaves the old file whole, and readers never
    see a half-written one. pyinfra's own upload writes straight onto the target when connected
    as root, hence this. ``--diff`` shows the change.

    **Example:**

    .. code:: python

        text_file(name="Kernel arguments for new kernels", path="/etc/kernel/cmdline",
                  text="ro rhgb quiet iommu=pt\\n")
    """
    files = node_files(host)
    present = files.current(path)
    mode = mode or (present.mode if present else "644")
    if not files.differs(path, text, mode):
        host.noop(f"{path} is up to date")
        return
    before = present.text if present else None
    lines = ["(secret: contents not shown)"] if secret else _diff_lines(path, before, text)
    if state.config.DIFF:
        host.log(f"Will {'create' if before is None else 'modify'} {path}", logger.info)
        for line in lines:
            logger.info("  %s", line)
    record(host, "diff", path=path, lines=lines)
    folder, _, base = path.rpartition("/")
    temp = f"{folder}/.{base}.halo-new"
    q = shlex.quote
    if present is None:
        mkdir = f"mkdir -p {q(folder or '/')}"
        yield mkdir if owner == "root" else f"runuser -u {q(owner)} -- {mkdir}"
    yield FileUploadCommand(StringIO(text), temp, remote_temp_filename=host.get_temp_filename(temp))
    yield (
        f"chown {q(owner)}: {q(temp)} && chmod {mode} {q(temp)} && "
        f"{RESTORE_SELINUX_LABEL.format(path=q(temp))} && mv -f {q(temp)} {q(path)}"
    )


def _diff_lines(path: str, current: str | None, text: str) -> list[str]:
    return list(
        difflib.unified_diff(
            (current or "").splitlines(), text.splitlines(), path, path, lineterm="", n=1
        )
    )


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
def reboot_and_wait(timeout: int, interval: float = 2.0):
    """
    Reboot the node and wait until it is back and has finished booting.

    + timeout: seconds to wait for the node to come back (the caller's `reboot_timeout`)
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
    with waiting(host, f"{host.name} to come back from the reboot (up to {timeout} s)"):
        return _reconnect_after_boot(host, new_boot, timeout, interval)


def _reconnect_after_boot(host, new_boot: str, timeout: int, interval: float) -> bool:
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


@operation(is_idempotent=False)
def pull_image(user: str, image: str):
    """
    Pull a container image into a user's rootless storage (as upstream does), saying every few
    seconds how long the pull of a multi-gigabyte image has taken so far.

    + user: the cluster user
    + image: image name, tag or ``name@sha256:...`` digest

    **Example:**

    .. code:: python

        pull_image(name="Pull the vLLM image", user="vllm",
                   image="docker.io/kyuz0/vllm-therock-gfx1151:latest")
    """
    command = as_user(user, f"podman pull --quiet {shlex.quote(image)} >/dev/null")
    yield FunctionCommand(run_saying_what, (command, f"podman pull {image} as {user}"), {})


def run_saying_what(state, host, command: str, what: str) -> bool:
    """Run a long command, logging what it waits for and for how long so far."""
    with waiting(host, what):
        done, output = host.run_shell_command(command)
    if not done:
        raise OperationError(f"{what} failed: {output.stderr.strip()[-500:]}")
    return True


@operation(is_idempotent=False)
def toolbox_container(user: str, toolbox: str, image: str, options: list[str]):
    """
    Create the user's toolbox from ``image``, or recreate it when the image or the options
    changed since it was made (recorded in the user's ~/.local/state/halo-cluster); then remove
    the image it was made from before, if that one is no longer the current one.

    + user: the cluster user
    + toolbox: container name
    + image: the image to make it from
    + options: podman options for ``toolbox create NAME --image IMAGE -- OPTIONS``

    **Example:**

    .. code:: python

        toolbox_container(name="Toolbox", user="vllm", toolbox="vllm-therock-gfx1151",
                          image="docker.io/kyuz0/vllm-therock-gfx1151:latest",
                          options=["--device", "/dev/dri"])
    """
    q = shlex.quote
    record = f"~{user}/{toolbox_files.state_file(toolbox)}"
    create = f"toolbox create --assumeyes --image {q(image)} {q(toolbox)} -- "
    create += " ".join(q(o) for o in options)
    yield "\n".join(
        (
            "set -e",
            f"new=$({as_user(user, IMAGE_ID + q(image))})",
            f"old=$({as_user(user, CONTAINER_IMAGE + q(toolbox))} 2>/dev/null || true)",
            f'want="$new {" ".join(options)}"',
            f"have=$(cat {record} 2>/dev/null || true)",
            'if [ "$old" != "$new" ] || [ "$have" != "$want" ]; then',
            f'  [ -z "$old" ] || {as_user(user, f"toolbox rm --force {q(toolbox)}")} >/dev/null',
            f"  {as_user(user, create)} >/dev/null",
            f"  {as_user(user, f'mkdir -p ~{user}/{toolbox_files.STATE_DIR}')}",
            f'  printf "%s\\n" "$want" > {record} && chown {q(user)}: {record}',
            '  if [ -n "$old" ] && [ "$old" != "$new" ]; then',
            f"    {as_user(user, 'podman rmi $old')} >/dev/null 2>&1 || true",
            "  fi",
            "fi",
        )
    )


@operation(is_idempotent=False)
def user_ssh_key(user: str):
    """
    Give a user an ed25519 key pair, made on the node: the private key never leaves it.

    + user: the user

    **Example:**

    .. code:: python

        user_ssh_key(name="SSH key of the cluster user", user="vllm")
    """
    keygen = "ssh-keygen -q -t ed25519 -N '' -C halo-cluster -f ~/.ssh/id_ed25519"
    script = f"test -f ~/.ssh/id_ed25519 || {{ mkdir -p -m 700 ~/.ssh && {keygen}; }}"
    yield as_user(user, f"sh -c {shlex.quote(script)}")


@operation(is_idempotent=False)
def authorize_key(user: str, key: str | None, from_host: str):
    """
    Add a public key to a user's authorized_keys, keeping every other line.

    + user: the user whose authorized_keys get the key
    + key: the public key line; None reads ``~USER/.ssh/id_ed25519.pub`` from ``from_host`` when
      the operation runs (the key is made earlier in the same run)
    + from_host: inventory name of the host the key belongs to

    **Example:**

    .. code:: python

        authorize_key(name="Head may log in", user="vllm", key=None, from_host="halo1")
    """
    if key:
        yield _authorize_script(user, key)
    else:
        yield FunctionCommand(_authorize_from, (user, from_host), {})


def _authorize_from(state, host, user: str, from_host: str) -> bool:
    source = next(h for h in state.inventory if h.data.get("halo_node") == from_host)
    read, output = source.run_shell_command(f"cat ~{user}/.ssh/id_ed25519.pub")
    if not read or not output.stdout.strip():
        raise OperationError(f"cannot read {from_host}'s public key of {user}")
    written, _ = host.run_shell_command(_authorize_script(user, output.stdout.strip()))
    return written


def _authorize_script(user: str, key: str) -> str:
    keys = f"~{user}/.ssh/authorized_keys"
    q = shlex.quote
    return (
        f"install -d -m 700 -o {q(user)} -g $(id -gn {q(user)}) ~{user}/.ssh && "
        f"{{ grep -qxF {q(key)} {keys} 2>/dev/null || echo {q(key)} >> {keys}; }} && "
        f"chown {q(user)}: {keys} && chmod 600 {keys} && "
        f"{RESTORE_SELINUX_LABEL.format(path=f'~{user}/.ssh')}"
    )

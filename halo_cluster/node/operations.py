"""The pyinfra operations several roles use (one role's own are in its folder,
`roles/NAME/operations.py`): small generators that yield commands, nothing else."""

from __future__ import annotations

import difflib
import shlex
from io import StringIO

from pyinfra import host, logger, state
from pyinfra.api import FileUploadCommand, OperationError, operation

from halo_cluster.node.nodefiles import node_files
from halo_cluster.node.progress import Measure, transferring, waiting
from halo_cluster.node.report import record

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


def run_saying_what(state, host, command: str, what: str, measure: Measure | None = None) -> bool:
    """Run a long command, logging what it waits for and for how long so far, or for a
    transfer its `measure`d bytes, rate and time left."""
    with transferring(host, what, measure) if measure else waiting(host, what):
        done, output = host.run_shell_command(command)
    if not done:
        raise OperationError(f"{what} failed: {output.stderr.strip()[-500:]}")
    return True

"""Kernel arguments in the three places that decide what boots, now and after a kernel upgrade:
GRUB_CMDLINE_LINUX in /etc/default/grub, the options line of every BLS entry, /etc/kernel/cmdline.
Each for the kernel it boots: `amdgpu.gttsize` only where that kernel still takes it (before
6.15, `cmdline.for_kernel`), judged by the entry's `version` line; the two files the next kernels
take their arguments from, as the entries' newest kernels.
"""

import re

from pyinfra import host, logger
from pyinfra.api import deploy
from pyinfra.operations import server

from halo_cluster.decide import cmdline
from halo_cluster.node.context import NodeContext
from halo_cluster.node.nodefiles import NodeFiles, node_files
from halo_cluster.node.operations import text_file

ORDER = 20
PACKAGES = ()
GRUB = "/etc/default/grub"
KERNEL_CMDLINE = "/etc/kernel/cmdline"
GRUBENV = "/boot/grub2/grubenv"
ENTRIES = "/boot/loader/entries"
VERSION_LINE = re.compile(r"^version[ \t]+(\S+)", re.MULTILINE)  # a BLS entry's kernel release


def paths(data) -> tuple[str, ...]:
    return (GRUB, KERNEL_CMDLINE, GRUBENV, f"{ENTRIES}/*.conf")


@deploy("Kernel arguments")
def apply(node: NodeContext) -> None:
    wanted, remove = host.data.halo_kernel_args, host.data.halo_kernel_args_remove
    files = node_files(host)
    entries = files.under(ENTRIES)
    if not entries:
        logger.warning(f"{host.print_prefix}no BLS entries in {ENTRIES}: only GRUB defaults edited")

    given = (list(wanted), list(remove))
    by_entry = {
        path: cmdline.for_kernel(entry_version(text), *given) for path, text in entries.items()
    }
    # the next kernels are newer than every entry: where one entry's kernel no longer takes an
    # argument (amdgpu.gttsize), theirs does not either
    future, future_remove = next((a for a in by_entry.values() if a != given), given)
    grub = files.text(GRUB)
    grub_text = None
    if grub is not None:
        grub_text = cmdline.edit_grub_defaults(grub, future, future_remove)
        text_file(name=f"Kernel arguments in {GRUB}", path=GRUB, text=grub_text)

    for path, text in sorted(entries.items()):
        add, drop = by_entry[path]
        text_file(
            name=f"Kernel arguments in {path}",
            path=path,
            text=cmdline.edit_bls_entry(text, add, drop),
        )

    present = files.text(KERNEL_CMDLINE)
    new_cmdline = cmdline.edit_kernel_cmdline(_base_cmdline(files, entries), future, future_remove)
    text_file(
        name=f"Kernel arguments for new kernels in {KERNEL_CMDLINE}",
        path=KERNEL_CMDLINE,
        text=new_cmdline,
    )
    if grub is not None and grub_text != grub and present == new_cmdline:
        # kernel-install re-runs grub2-mkconfig when /etc/kernel/cmdline is older than the
        # GRUB defaults; keep it newer so a new kernel takes its options from it
        server.shell(
            name=f"Keep {KERNEL_CMDLINE} newer than the GRUB defaults",
            commands=[f"touch {KERNEL_CMDLINE}"],
        )


def entry_version(text: str) -> str | None:
    """A BLS entry's `version` key: the kernel release it boots."""
    found = VERSION_LINE.search(text)
    return found.group(1) if found else None


def _base_cmdline(files: NodeFiles, entries: dict[str, str]) -> str:
    """/etc/kernel/cmdline as it is, or, when missing, the default boot entry's options."""
    present = files.text(KERNEL_CMDLINE)
    if present is not None:
        return present
    default = cmdline.default_entry(entries, files.text(GRUBENV))
    return (cmdline.bls_options(entries[default]) if default else None) or ""

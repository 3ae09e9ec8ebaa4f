"""Kernel arguments in the three places that decide what boots, now and after a kernel upgrade:
GRUB_CMDLINE_LINUX in /etc/default/grub, the options line of every BLS entry, /etc/kernel/cmdline.
"""

from pyinfra import host, logger
from pyinfra.api import deploy
from pyinfra.operations import server

from halo_cluster import cmdline
from halo_cluster.facts import TextFiles
from halo_cluster.operations import text_file

GRUB = "/etc/default/grub"
KERNEL_CMDLINE = "/etc/kernel/cmdline"
GRUBENV = "/boot/grub2/grubenv"
PROC_CMDLINE = "/proc/cmdline"
ENTRIES = "/boot/loader/entries"
BOOT_FILES = (GRUB, KERNEL_CMDLINE, PROC_CMDLINE, GRUBENV, f"{ENTRIES}/*.conf")

DEFAULTS = {
    "halo_kernel_args": [
        "iommu=pt",
        "pci=realloc",
        "pcie_aspm=off",
        "amdgpu.gttsize=126976",
        "ttm.pages_limit=32505856",
    ],
    "halo_kernel_args_remove": ["amd_iommu=off"],
}


def boot_files() -> dict:
    return host.get_fact(TextFiles, paths=BOOT_FILES)


def boot_entries(files: dict) -> dict[str, str]:
    return {path: f.text for path, f in files.items() if path.startswith(f"{ENTRIES}/")}


@deploy("Kernel arguments", data_defaults=DEFAULTS)
def kernel_args() -> None:
    wanted, remove = host.data.halo_kernel_args, host.data.halo_kernel_args_remove
    files = boot_files()
    entries = boot_entries(files)
    if not entries:
        logger.warning(f"{host.print_prefix}no BLS entries in {ENTRIES}: only GRUB defaults edited")

    grub = files.get(GRUB)
    grub_text = cmdline.edit_grub_defaults(grub.text, wanted, remove) if grub else None
    if grub:
        text_file(
            name=f"Kernel arguments in {GRUB}",
            path=GRUB,
            text=grub_text,
            current=grub.text,
            mode=grub.mode,
        )

    for path, text in sorted(entries.items()):
        text_file(
            name=f"Kernel arguments in {path}",
            path=path,
            text=cmdline.edit_bls_entry(text, wanted, remove),
            current=text,
            mode=files[path].mode,
        )

    present = files.get(KERNEL_CMDLINE)
    default = cmdline.default_entry(entries, files[GRUBENV].text if GRUBENV in files else None)
    base = present.text if present else cmdline.bls_options(entries[default]) if default else ""
    new_cmdline = cmdline.edit_kernel_cmdline(base or "", wanted, remove)
    text_file(
        name=f"Kernel arguments for new kernels in {KERNEL_CMDLINE}",
        path=KERNEL_CMDLINE,
        text=new_cmdline,
        current=present.text if present else None,
        mode=present.mode if present else "644",
    )
    if grub and grub_text != grub.text and present and present.text == new_cmdline:
        # kernel-install re-runs grub2-mkconfig when /etc/kernel/cmdline is older than the
        # GRUB defaults; keep it newer so a new kernel takes its options from it
        server.shell(
            name=f"Keep {KERNEL_CMDLINE} newer than the GRUB defaults",
            commands=[f"touch {KERNEL_CMDLINE}"],
        )


def inactive_args() -> list[str]:
    """Wanted arguments missing from the running kernel, and removed ones still present."""
    running = boot_files()[PROC_CMDLINE].text
    return cmdline.missing_args(
        running, host.data.halo_kernel_args, host.data.halo_kernel_args_remove
    )

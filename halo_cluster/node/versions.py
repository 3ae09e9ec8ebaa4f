"""Which kernel and firmware a node runs and has installed (`InstalledVersions`): `uname -r` and
`rpm -q` of the kernel's and the amdgpu firmware's packages, with which dnf the node has.

The deploy reads it in the node's one command (the os role judges it against the known-versions
list), `halo-cluster status` and `make verify` read the same command (`versions_command`) and
show each node's versions the same way (`summary`).
"""

from __future__ import annotations

from typing import Any, TypedDict

from pyinfra.api import FactBase

from halo_cluster.decide import cmdline
from halo_cluster.node.reads import cached

# Fedora's kernel is these packages at one EVR (the kernel's own spec); irdma is in
# kernel-modules, ice in kernel-core, so they move with it (versions-notes.md section 2)
KERNEL_PACKAGES = (
    "kernel",
    "kernel-core",
    "kernel-modules",
    "kernel-modules-core",
    "kernel-modules-extra",
)
# the amdgpu blobs are in amd-gpu-firmware; every firmware subpackage requires
# linux-firmware-whence of its own version, so the set moves together (versions-notes.md 1)
FIRMWARE_PACKAGES = ("amd-gpu-firmware", "linux-firmware", "linux-firmware-whence")
KERNEL = "kernel-core"
FIRMWARE = "amd-gpu-firmware"
# the command that moves every node to a new kernel or firmware, and its option for each package:
# the os role's refusal of a known-bad version names it as the fix
UPGRADE_OS = "halo-cluster upgrade --os"
UPGRADE_OPTIONS = {KERNEL: "--kernel", FIRMWARE: "--firmware"}


class Package(TypedDict):
    name: str
    evr: str  # rpm's %{EVR}: [EPOCH:]VERSION-RELEASE
    arch: str


class VersionsInfo(TypedDict):
    """A node's kernel and firmware, as `InstalledVersions` reads them."""

    running: str  # uname -r: VERSION-RELEASE.ARCH of the booted kernel
    packages: list[Package]  # the kernel's and firmware's installed packages (rpm -q)
    dnf5: bool  # dnf is dnf5 (Fedora 41 on: /etc/dnf/versionlock.toml), else dnf 4 (its plugin)


def versions_command() -> str:
    """One shell line: `running`, `dnf5` and one `rpm NAME EVR ARCH` line per installed package
    (rpm's own `package X is not installed` lines are left out by the prefix)."""
    names = " ".join((*KERNEL_PACKAGES, *FIRMWARE_PACKAGES))
    return (
        'echo "running $(uname -r)"; '
        "command -v dnf5 >/dev/null 2>&1 && echo dnf5; "
        f"rpm -q --qf 'rpm %{{NAME}} %{{EVR}} %{{ARCH}}\\n' {names} 2>/dev/null; true"
    )


def versions_process(lines: list[str]) -> VersionsInfo:
    info = VersionsInfo(running="", packages=[], dnf5=False)
    for line in lines:
        words = line.split()
        if words[:1] == ["running"] and len(words) == 2:
            info["running"] = words[1]
        elif words == ["dnf5"]:
            info["dnf5"] = True
        elif words[:1] == ["rpm"] and len(words) == 4:
            info["packages"].append(Package(name=words[1], evr=words[2], arch=words[3]))
    return info


class InstalledVersions(FactBase[VersionsInfo]):
    """The running kernel, the installed kernel and firmware packages, and which dnf."""

    @staticmethod
    def default() -> VersionsInfo:
        return VersionsInfo(running="", packages=[], dnf5=False)

    def command(self) -> str:
        return versions_command()

    def process(self, output: list[str]) -> VersionsInfo:
        return versions_process(output)


def installed(info: VersionsInfo, name: str) -> list[str]:
    """The EVRs of `name` installed on the node, as rpm lists them."""
    return [p["evr"] for p in info["packages"] if p["name"] == name]


def running_package(info: VersionsInfo) -> Package | None:
    """The installed kernel-core the node booted (`uname -r` is its VERSION-RELEASE.ARCH); None
    for a kernel no package installed (a lab node runs its host's)."""
    return next(
        (
            p
            for p in info["packages"]
            if p["name"] == KERNEL and f"{p['evr']}.{p['arch']}" == info["running"]
        ),
        None,
    )


def firmware(info: VersionsInfo) -> str:
    """The amdgpu firmware's EVR, or `none` when amd-gpu-firmware is not installed."""
    return ", ".join(installed(info, FIRMWARE)) or "none"


def summary(info: VersionsInfo) -> str:
    """One line: the running kernel, the installed kernel-core EVRs, the firmware."""
    kernels = ", ".join(installed(info, KERNEL)) or "none"
    return (
        f"kernel {info['running'] or '?'} (kernel-core installed: {kernels}), "
        f"{FIRMWARE} {firmware(info)}"
    )


def upgrade_command(package: str, version: str) -> str:
    """`halo-cluster upgrade --os --kernel|--firmware VERSION` for this package."""
    return f"{UPGRADE_OS} {UPGRADE_OPTIONS[package]} {version}"


def running_kernel_args(host: Any) -> tuple[list[str], list[str]]:
    """The kernel arguments (to have, to lack) the running kernel should have booted with: the
    config's, for its release (`cmdline.for_kernel`: no `amdgpu.gttsize` from 6.15), as the
    kernel role wrote them into its boot entry. Read from `InstalledVersions`, which the os role
    declares on every node (the reboot role and the serve role's ranks ask)."""
    running = cached(host, InstalledVersions)["running"] or None
    data = host.data
    return cmdline.for_kernel(running, data.halo_kernel_args, data.halo_kernel_args_remove)

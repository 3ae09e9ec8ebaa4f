"""`halo-cluster upgrade --os`'s targets and what it runs on a node: the targets judged by the
os role's known-versions list, the nodes' read (versions, data interface, boot entries, default
entry), and the dnf, GRUB and dracut scripts of each step (docs/kernel-upgrades.md)."""

from __future__ import annotations

import functools
import json
import shlex
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from halo_cluster.config import rpmversion
from halo_cluster.config.docs import page
from halo_cluster.config.model import Cluster, Node
from halo_cluster.config.schema import host_name
from halo_cluster.node import batch
from halo_cluster.node.versions import (
    FIRMWARE,
    FIRMWARE_PACKAGES,
    KERNEL,
    KERNEL_PACKAGES,
    VersionsInfo,
    installed,
    running_package,
    versions_command,
    versions_process,
)
from halo_cluster.tools import options

ENTRIES = "/boot/loader/entries"
ROLLBACK = "/var/lib/halo-cluster/rollback"  # the running firmware's RPMs: its way back
DNF = "dnf --assumeyes --quiet"
EXAMPLES = {"--kernel": "6.18.9-200.fc43", "--firmware": "20260110-1.fc43"}
# the os role's value the targets are given to its preflight as (roles/os/schema.py, Os.upgrade)
UPGRADE_DATA = host_name("os.upgrade")


@dataclass(frozen=True)
class Targets:
    kernel: str | None  # EVR without the arch, e.g. 6.18.9-200.fc43
    firmware: str | None  # amd-gpu-firmware's EVR, e.g. 20260110-1.fc43

    def describe(self) -> str:
        kernel = [f"{KERNEL} {self.kernel}"] if self.kernel else []
        return " and ".join(kernel + ([f"{FIRMWARE} {self.firmware}"] if self.firmware else []))

    def packages(self) -> dict[str, str]:
        """{package: EVR} of the targets given, as the os role's preflight reads them."""
        given = ((KERNEL, self.kernel), (FIRMWARE, self.firmware))
        return {package: evr for package, evr in given if evr}


def deploy_data(targets: Targets) -> list[str]:
    """P1's deploy's `--data` values: no reboot (P2 reboots each node in its turn), and the
    targets, so that the os role admits on a node the known-bad version they replace."""
    return ["halo_reboot=never", f"{UPGRADE_DATA}={json.dumps(targets.packages())}"]


def target_rule(option: str) -> options.Rule:
    """OPTION's rule in the parser: an EVR by rpm's ASCII grammar without the arch. A NEVRA's
    `.noarch` would pass the known-bad list's comparison and then install that very build, an
    Arabic-Indic digit would read as an epoch."""
    return functools.partial(rpmversion.problem, example=EXAMPLES[option])


def judge_targets(cluster: Cluster, targets: Targets) -> list[str]:
    """One line per target the list calls bad (each refuses the upgrade), printed notes aside;
    the targets passed their rule (`target_rule`) in the parser."""
    refused = []
    for package, evr in ((KERNEL, targets.kernel), (FIRMWARE, targets.firmware)):
        if evr is None:
            continue
        entry = cluster.os.judged(package, evr)
        if entry is None:
            print(f"{package} {evr}: not in the known-versions list: on your judgement")
        elif entry.verdict == "bad":
            refused.append(
                f"{package} {evr} is known bad: {entry.symptom} (source: {entry.source}): "
                f"choose another version ({page('kernel-upgrades.md')})"
            )
    return refused


def order(nodes: Sequence[Node]) -> list[Node]:
    """Workers in config order, then the head: the head serves until every worker passed (a
    partial upgrade's nodes in the same order)."""
    return [n for n in nodes if n.role != "head"] + [n for n in nodes if n.role == "head"]


def without_arch(release: str) -> str:
    """`uname -r`'s VERSION-RELEASE.ARCH as the EVR rpm prints (no epoch on Fedora's kernels)."""
    return release.rsplit(".", 1)[0]


def entry_id(entries: Iterable[str], release: str) -> str | None:
    """The BLS id (file name without .conf) of `uname -r`'s release among the entry files."""
    suffix = f"-{release}.conf"
    return next((e.removesuffix(".conf") for e in sorted(entries) if e.endswith(suffix)), None)


def kernel_names(info: VersionsInfo) -> list[str]:
    """The kernel's packages the node has at its running EVR: the target installs the same."""
    running = running_package(info)
    names = [n for n in KERNEL_PACKAGES if running and running["evr"] in installed(info, n)]
    return names or [KERNEL]


def firmware_names(info: VersionsInfo) -> list[str]:
    return [n for n in FIRMWARE_PACKAGES if installed(info, n)] or [FIRMWARE]


def kernel_specs(info: VersionsInfo, targets: Targets) -> list[str]:
    return [f"{n}-{targets.kernel}" for n in kernel_names(info)] if targets.kernel else []


def firmware_specs(info: VersionsInfo, targets: Targets) -> list[str]:
    return [f"{n}-{targets.firmware}" for n in firmware_names(info)] if targets.firmware else []


def install_specs(info: VersionsInfo, targets: Targets) -> list[str]:
    """Every target's packages: what the locks allow from P1 on."""
    return kernel_specs(info, targets) + firmware_specs(info, targets)


def running_specs(info: VersionsInfo) -> list[str]:
    """The running kernel's and firmware's NEVRs: what a lock holds the node at."""
    running = running_package(info)
    specs = [f"{n}-{running['evr']}" for n in kernel_names(info)] if running else []
    for name in FIRMWARE_PACKAGES:
        specs += [f"{name}-{evr}" for evr in installed(info, name)]
    return specs


def locks_script(names: list[str], specs: list[str]) -> str:
    """dnf's locks on these names replaced by these specs (dnf5 and dnf 4's plugin alike)."""
    return (
        f"{DNF} versionlock delete {' '.join(names)} >/dev/null 2>&1 || true\n"
        f"{DNF} versionlock add {' '.join(specs)}\n"
    )


def prepare_script(info: VersionsInfo, targets: Targets, default_id: str) -> str:
    """P1 on one node: the target kernel installed, the default entry kept on the running
    kernel (kernel-install made the new one the default, UPDATEDEFAULT=yes)."""
    return (
        "set -e\n"
        f"{DNF} install {' '.join(kernel_specs(info, targets))}\n"
        f"grub2-set-default {shlex.quote(default_id)}\n"
    )


def firmware_script(info: VersionsInfo, targets: Targets, release: str) -> str:
    """P2 on one node, in its turn: the target firmware installed and the initramfs of the
    kernel its trial boots rebuilt (the amdgpu blobs load from it). Firmware applies to every
    kernel: installed in P1, it would be on every node before the first gate."""
    return (
        f"set -e\n{DNF} install {' '.join(firmware_specs(info, targets))}\n"
        f"if command -v dracut >/dev/null; then dracut -f --kver {shlex.quote(release)}; fi\n"
    )


def firmware_backup_script(info: VersionsInfo) -> str:
    """P0 for a firmware target: the running set's RPMs kept on the node for its way back."""
    specs = " ".join(f"{n}-{e}" for n in FIRMWARE_PACKAGES for e in installed(info, n))
    archive = "$(rpm -q fedora-repos-archive >/dev/null 2>&1 && echo --enablerepo=updates-archive)"
    return (
        f"set -e\nmkdir -p {ROLLBACK}\nrm -f {ROLLBACK}/*.rpm\n"
        f"{DNF} download {archive} --destdir {ROLLBACK} {specs}\n"
    )


# GRUB's tool reads the default block for FILE "-" (grub-editenv(1))
SAVED_ENTRY = "grub2-editenv - list 2>/dev/null | sed -n 's/^saved_entry=//p'"

FIRMWARE_BACK = (
    f"set -e\n{DNF} downgrade {ROLLBACK}/*.rpm\n"
    # the amdgpu blobs load from the initramfs (the lab's nodes have no dracut, nor initramfs)
    'if command -v dracut >/dev/null; then dracut -f --kver "$(uname -r)"; fi\n'
)


@dataclass(frozen=True)
class NodeRead:
    """What P0 read on one node."""

    info: VersionsInfo
    interface: str  # the data link's, the one with the node's address
    entries: list[str]  # the BLS entry files
    saved: str  # grubenv's saved_entry, "" when unset


# P0's reads of a node, one command each, run at once in one batched script (node/batch.py)
READ = ("versions", "iface", "saved", "entries")


def read_script(node: Node) -> str:
    """P0's one read of a node: its versions, the data interface (the one with its address),
    grubenv's saved entry and the BLS entry files."""
    commands = (
        versions_command(),
        f"ip -o -4 addr show to {node.address} | awk '{{print $2}}'",
        SAVED_ENTRY,
        f"ls -1 {ENTRIES}",
    )
    return batch.named(dict(zip(READ, commands, strict=True)))


def node_read(out: str) -> NodeRead | None:
    """`read_script`'s output; None when no interface has the node's address."""
    found = batch.sections(out, READ)
    interface = next(iter(found["iface"].filled), "").strip()
    if not interface:
        return None
    entries = [line.strip() for line in found["entries"].filled]
    saved = next(iter(found["saved"].filled), "").strip()
    return NodeRead(versions_process(found["versions"].filled), interface, entries, saved)


def kept_default(read: NodeRead, targets: Targets) -> str | None:
    """The entry P1 keeps as the default: the running kernel's, unless the node runs the
    target kernel without having passed its gate (a run stopped at its trial boot, exit 7):
    then the default it had, so that an ungated kernel never becomes the default."""
    running = entry_id(read.entries, read.info["running"])
    ungated = targets.kernel == without_arch(read.info["running"]) and read.saved != running
    if ungated and f"{read.saved}.conf" in read.entries:
        return read.saved
    return running


def already(info: VersionsInfo, targets: Targets) -> bool:
    """The node runs the target kernel and has the target firmware."""
    kernel = targets.kernel in (None, without_arch(info["running"]))
    return kernel and targets.firmware in (None, *installed(info, FIRMWARE))


def done(read: NodeRead, targets: Targets) -> bool:
    """The node runs the targets and its default is the running kernel (it passed its gate in
    an earlier run): no reboot."""
    running = entry_id(read.entries, read.info["running"])
    return already(read.info, targets) and read.saved == running


def new_release(info: VersionsInfo, targets: Targets) -> str:
    """The `uname -r` the node's trial boot should show."""
    old = info["running"]
    return f"{targets.kernel}.{old.rsplit('.', 1)[1]}" if targets.kernel else old


def promoted_specs(info: VersionsInfo, targets: Targets) -> list[str]:
    """What the locks hold a node at once it passed its gate."""
    running = running_specs(info)
    kernel = [s for s in running if not s.startswith(FIRMWARE_PACKAGES)]
    firmware = [s for s in running if s.startswith(FIRMWARE_PACKAGES)]
    if targets.kernel:
        kernel = [f"{n}-{targets.kernel}" for n in kernel_names(info)]
    if targets.firmware:
        firmware = [f"{n}-{targets.firmware}" for n in firmware_names(info)]
    return kernel + firmware

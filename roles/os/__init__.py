"""The node's Fedora release and its kernel and firmware. The release (its /etc/os-release in the
snapshot) is judged by the releases table (`releases.py`: an unknown one refuses the node, one
past its end of support is a warning, every node on one release), and picks the entries of the
known-versions list the node is judged by. Its kernel and firmware: which versions a node runs,
judged against the known-versions list before anything changes (a known-bad one the node
runs or may boot next refuses the node, with the symptom and the fix: `halo-cluster upgrade
--os`, or dnf by hand; one older than the running kernel is a WARN; that upgrade's own deploy
admits the version it replaces), the same versions on every node, and
with `os.lock: true` dnf version locks on the running versions.
"""

from __future__ import annotations

import datetime
from typing import Any

from pyinfra import host, logger, state
from pyinfra.api import deploy
from pyinfra.operations import server

from halo_cluster.config import rpmversion
from halo_cluster.decide.preflight import FAIL, NOT_VERIFIED, OK, WARN, Check
from halo_cluster.node.context import NodeContext
from halo_cluster.node.nodefiles import cached, node_files
from halo_cluster.node.operations import text_file
from halo_cluster.node.pyinfra_internals import active, run
from halo_cluster.node.report import events
from halo_cluster.node.versions import (
    FIRMWARE,
    FIRMWARE_PACKAGES,
    KERNEL,
    KERNEL_PACKAGES,
    InstalledVersions,
    VersionsInfo,
    firmware,
    installed,
    running_package,
    upgrade_command,
)
from halo_cluster.roles.os import installonly, releases, versions
from halo_cluster.roles.os.versions import BAD, GOOD, Entry

ORDER = 15
PACKAGES = ()  # dnf5's versionlock is built in (every supported release: releases.py)


def paths(data) -> tuple[str, ...]:
    return (versions.DNF5_LOCKS, versions.DNF4_LOCKS, installonly.DNF_CONF)


def reads(data) -> tuple[tuple[type, dict], ...]:
    return ((InstalledVersions, {}),)


def known(data: Any, release: str | None) -> tuple[Entry, ...]:
    """The list a node of this release is judged by: cluster.yml's entries, then the
    repository's, each of them about every release or about this one."""
    entries = (versions.entry(item, item["mine"]) for item in data.halo_os_known_versions)
    return versions.for_release(entries, release)


def today() -> datetime.date:
    """The day (UTC) a release's end of support is judged against (the plan tests set it)."""
    return datetime.datetime.now(datetime.UTC).date()


def release_of(node_host: Any) -> str | None:
    """The node's Fedora VERSION_ID, from its os-release in the snapshot (the node's one read);
    None for a node whose read found no Fedora (refused for that, or unreadable)."""
    found = node_files(node_host).os_release()
    return found.get("VERSION_ID") if found.get("ID") == "fedora" else None


def preflight(node_host: Any, node: NodeContext) -> list[Check]:
    """The node's release, then its kernel and firmware against the list of its release, before
    anything changes (`node` is the hook's, unread here: all is read from `node_host`): an
    unknown release, or a release another node does not run, is a FAIL that refuses the node, as
    is a known-bad running version or an installed kernel the next boot may run (a WARN in the
    deploy of an upgrade that replaces it); a known-bad kernel older than the running one is a
    WARN with the fix; a version the list does not know is NOT VERIFIED; versions that differ from
    another node's are a WARN."""
    os_release = node_files(node_host).os_release()
    release = os_release.get("VERSION_ID")
    info = cached(node_host, InstalledVersions)
    entries = known(node_host.data, release)
    targets = upgrade_targets(node_host.data, entries)
    judged = releases.check(os_release, today())
    # a release outside the table is refused for that alone, not also for differing
    mixed = [] if judged.refuses else [same_release(node_host, release)]
    return [
        judged,
        *mixed,
        running_kernel(info, entries, targets.get(KERNEL)),
        *installed_kernels(info, entries, targets.get(KERNEL)),
        amdgpu_firmware(info, entries, targets.get(FIRMWARE)),
        same_versions(node_host, info),
    ]


def upgrade_targets(data: Any, entries: tuple[Entry, ...]) -> dict[str, str]:
    """{package: EVR} the running `halo-cluster upgrade --os` installs on the node, each one the
    list does not call bad (the upgrade refuses such a target itself): the known-bad version of
    that package is the one being replaced. Only the packages it names: a firmware upgrade
    admits no known-bad kernel; and only rpm's versions, which the list can judge."""
    return {
        package: evr
        for package, evr in data.halo_os_upgrade.items()
        if rpmversion.problem(evr) is None
        and getattr(versions.judge(entries, package, evr), "verdict", None) != BAD
    }


def _known(entry: Entry) -> str:
    return f"known {entry.verdict}: {entry.source}"


def _bad(what: str, entry: Entry, fix: str) -> str:
    return f"known-bad {what}: {entry.symptom} (source: {entry.source}); fix: {fix}"


def _replaced(what: str, package: str, target: str, how: str) -> str:
    """The WARN of a known-bad version the upgrade under way replaces."""
    command = upgrade_command(package, target)
    return f"known-bad {what}, admitted: this deploy is `{command}`'s, which {how}"


def _upgrade_fix(package: str, good: str | None) -> str:
    """The command that repairs the node: to the newest good version, else to one of yours."""
    if good:
        return f"`{upgrade_command(package, good)}`"
    return f"`{upgrade_command(package, 'VERSION')}` with a version the list does not call bad"


def running_kernel(info: VersionsInfo, entries: tuple[Entry, ...], target: str | None) -> Check:
    package = running_package(info)
    if package is None:
        kernels = ", ".join(installed(info, KERNEL)) or "none"
        return Check(
            "kernel",
            NOT_VERIFIED,
            f"running {info['running'] or '?'}, no installed {KERNEL}'s (rpm -q {KERNEL}: "
            f"{kernels}): its version cannot be judged",
        )
    evr = package["evr"]
    entry = versions.judge(entries, KERNEL, evr)
    if entry is None:
        return Check("kernel", NOT_VERIFIED, f"running {evr}: not in the known-versions list")
    if entry.verdict == GOOD:
        return Check("kernel", OK, f"running {evr}, {_known(entry)}")
    what = f"{KERNEL} {evr} (running)"
    if target:
        how = "then boots the node into it once, gates and keeps it"
        return Check("kernel", WARN, _replaced(what, KERNEL, target, how))
    good = versions.newest_good(entries, KERNEL)
    by_hand = (
        f"`dnf install kernel-{good}`, reboot into it, then `dnf remove {KERNEL}-{evr}`"
        if good
        else "install a kernel the list does not call bad, and reboot into it"
    )
    fix = f"{_upgrade_fix(KERNEL, good)}, or by hand {by_hand}"
    return Check("kernel", FAIL, _bad(what, entry, fix), refuses=True)


def installed_kernels(
    info: VersionsInfo, entries: tuple[Entry, ...], target: str | None
) -> list[Check]:
    """A known-bad kernel installed beside the running one. Older than the running kernel (the
    install media's kernel on a fresh Fedora node), it runs only if someone picks it in the boot
    menu: a WARN with the fix, the node deployed. Newer, it is what the next boot runs (Fedora's
    kernel-install makes the newest kernel the default entry, /etc/sysconfig/kernel
    UPDATEDEFAULT=yes), and the deploy may reboot the node: a FAIL that refuses it. A kernel
    upgrade removes either once the node passed its gate."""
    running = running_package(info)
    checks = []
    for evr in installed(info, KERNEL):
        entry = versions.judge(entries, KERNEL, evr)
        if (running and evr == running["evr"]) or entry is None or entry.verdict != BAD:
            continue
        what = f"{KERNEL} {evr} (installed)"
        if target:
            how = "removes it once the node passed its gate"
            checks.append(Check("kernel", WARN, _replaced(what, KERNEL, target, how)))
            continue
        good = versions.newest_good(entries, KERNEL)
        fix = f"`dnf remove {KERNEL}-{evr}`, or {_upgrade_fix(KERNEL, good)}"
        if running and versions.compare_evr(evr, running["evr"]) < 0:
            what = f"{KERNEL} {evr} (installed, not running: older than {running['evr']})"
            checks.append(Check("kernel", WARN, _bad(what, entry, fix)))
            continue
        # newer than the running kernel, or no installed package runs: it may be the next boot's
        newer = ", newer than the running kernel: the next boot's" if running else ""
        what = f"{KERNEL} {evr} (installed{newer})"
        checks.append(Check("kernel", FAIL, _bad(what, entry, fix), refuses=True))
    return checks


def amdgpu_firmware(info: VersionsInfo, entries: tuple[Entry, ...], target: str | None) -> Check:
    found = installed(info, FIRMWARE)
    if not found:
        return Check("amdgpu firmware", NOT_VERIFIED, f"{FIRMWARE} is not installed (rpm -q)")
    evr = found[0]
    others = {n: e for n in FIRMWARE_PACKAGES[1:] for e in installed(info, n) if e != evr}
    entry = versions.judge(entries, FIRMWARE, evr)
    if entry is not None and entry.verdict == BAD:
        what = f"{FIRMWARE} {evr}"
        if target:
            how = "installs it on the node in its turn and gates it"
            return Check("amdgpu firmware", WARN, _replaced(what, FIRMWARE, target, how))
        fix = firmware_fix(info, entries, evr)
        return Check("amdgpu firmware", FAIL, _bad(what, entry, fix), refuses=True)
    if others:
        apart = ", ".join(f"{n} {e}" for n, e in others.items())
        return Check(
            "amdgpu firmware",
            WARN,
            f"{FIRMWARE} {evr} but {apart}: Fedora ties them to one version; "
            f"`dnf distro-sync {' '.join(FIRMWARE_PACKAGES)}`",
        )
    if entry is None:
        return Check("amdgpu firmware", NOT_VERIFIED, f"{evr}: not in the known-versions list")
    return Check("amdgpu firmware", OK, f"{FIRMWARE} {evr}, {_known(entry)}")


def firmware_fix(info: VersionsInfo, entries: tuple[Entry, ...], evr: str) -> str:
    """`halo-cluster upgrade --os --firmware` to the newest good firmware, or by hand the dnf
    command to it, every installed package of the set at once (they require
    linux-firmware-whence of their own version), and the initramfs rebuilt: the amdgpu blobs
    load from it."""
    good = versions.newest_good(entries, FIRMWARE)
    if good is None:
        by_hand = f"install a {FIRMWARE} version the list does not call bad"
    else:
        verb = "upgrade" if versions.compare_evr(good, evr) > 0 else "downgrade"
        names = [n for n in FIRMWARE_PACKAGES if installed(info, n)]
        specs = " ".join(f"{name}-{good}" for name in names)
        by_hand = f"`dnf {verb} {specs} && dracut -f --kver $(uname -r)`, then reboot"
    return f"{_upgrade_fix(FIRMWARE, good)}, or by hand {by_hand}"


def same_release(node_host: Any, release: str | None) -> Check:
    """The release every other node of the run has, as its own read found it: the nodes still
    in the run and those already refused (a node refused for its release is still of this
    cluster), so that each node of a mixed cluster is refused, whichever is judged first."""
    reached = {event["node"] for event in events(run(), "reached")}
    others = {
        other.data.get("halo_node"): found
        for other in state.inventory
        if other is not node_host and (active(other) or other.data.get("halo_node") in reached)
        if (found := release_of(other)) is not None
    }
    return releases.same_release(release, others)


def same_versions(node_host: Any, info: VersionsInfo) -> Check:
    """Every node of one cluster runs one RCCL/irdma/amdgpu code path: the kernel and the
    firmware the others run, as each one's read found them."""
    mine = (info["running"], firmware(info))
    differ = []
    for other in state.inventory:
        if other is node_host or not active(other):
            continue
        theirs = cached(other, InstalledVersions)
        if (theirs["running"], firmware(theirs)) != mine:
            name = other.data.get("halo_node")
            differ.append(f"{name} runs {theirs['running'] or '?'} with {firmware(theirs)}")
    text = f"kernel {mine[0] or '?'}, {FIRMWARE} {mine[1]}"
    if differ:
        return Check(
            "same versions",
            WARN,
            f"{text}; {'; '.join(differ)}: the nodes share one kernel and firmware code path "
            "(RCCL, irdma, amdgpu): make them equal",
        )
    return Check("same versions", OK, f"{text} on every node read")


def wanted_locks(info: VersionsInfo) -> dict[str, str]:
    """{name: EVR} to lock: the running kernel's installed packages and the firmware set."""
    wanted: dict[str, str] = {}
    running = running_package(info)
    if running:
        wanted |= {
            n: running["evr"] for n in KERNEL_PACKAGES if running["evr"] in installed(info, n)
        }
    for name in FIRMWARE_PACKAGES:
        if found := installed(info, name):
            wanted[name] = found[0]
    return wanted


@deploy("Kernel and firmware versions")
def apply(node: NodeContext) -> None:
    info = cached(host, InstalledVersions)
    if info["dnf5"]:
        keep_installonly(bool(host.data.halo_os_lock))
    if not host.data.halo_os_lock:
        return
    if running_package(info) is None:
        logger.warning(
            f"{host.print_prefix}os.lock: the running kernel {info['running']} is no installed "
            f"{KERNEL}'s: only the firmware is locked"
        )
    path = versions.DNF5_LOCKS if info["dnf5"] else versions.DNF4_LOCKS
    read_locks = versions.dnf5_locks if info["dnf5"] else versions.dnf4_locks
    locks = read_locks(node_files(host).text(path))
    wanted = wanted_locks(info)
    missing = versions.missing_locks(wanted, locks)
    if not missing:
        return
    listed = ", ".join(f"{name} {evr}" for name, evr in missing.items())
    command = "dnf versionlock add " + " ".join(f"{name}-{evr}" for name, evr in missing.items())
    # two calls: pyinfra names an operation by its line, and a node restoring one lock must not
    # share its name with a node locking its versions the first time
    if len(missing) < len(wanted):  # the deploy locked them all at once: someone removed these
        logger.warning(f"{host.print_prefix}version locks removed by hand: {listed}: restored")
        server.shell(
            name=f"Restore version locks removed by hand from {path}: {listed}", commands=[command]
        )
    else:
        server.shell(
            name=f"Lock the kernel and firmware versions in {path}: {listed}", commands=[command]
        )


def keep_installonly(lock: bool) -> None:
    """No install-only rotation while the lock holds (roles/os/installonly.py), the user's
    limit back when it goes."""
    text = node_files(host).text(installonly.DNF_CONF)
    wanted = installonly.held(text) if lock else installonly.released(text)
    if wanted is not None:
        text_file(
            name=f"Install-only rotation in {installonly.DNF_CONF}",
            path=installonly.DNF_CONF,
            text=wanted,
        )

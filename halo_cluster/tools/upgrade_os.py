"""`halo-cluster upgrade --os [--kernel VERSION] [--firmware VERSION]`: a new kernel and firmware
on every node, each node booting the new kernel once before it keeps it (docs/kernel-upgrades.md,
docs/design/day-after.md section 6).

P0 refuses a known-bad target and reads every node; P1 installs the kernel target on every node
at once, keeps each node's default boot entry on its running kernel and runs the deploy without
reboots; P2 takes the workers in config order, then the head: the firmware target installed
(with its initramfs), `grub2-reboot` into the new entry, reboot, gate; passed:
`grub2-set-default`, locks moved; failed: reboot into the old default (the one-time entry is
used up), stop. Exit codes as docs/ci.md: 0, 1 refused, 5 a step failed (in P1: before any
reboot), 6 a gate failed (that node rebooted into its old default), 7 a node did not come back.
"""

from __future__ import annotations

import functools
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from halo_cluster.config import lock as locks
from halo_cluster.config import rpmversion
from halo_cluster.config.docs import page
from halo_cluster.config.model import Cluster, Node
from halo_cluster.config.schema import host_name
from halo_cluster.decide import cmdline, rdmatools
from halo_cluster.node import boot
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
from halo_cluster.tools import options, project, reach, remote, sshconfig

OK, REFUSED, ABORTED, GATE_FAILED, NOT_BACK = 0, 1, 5, 6, 7
ENTRIES = "/boot/loader/entries"
ROLLBACK = "/var/lib/halo-cluster/rollback"  # the running firmware's RPMs: its way back
DNF = "dnf --assumeyes --quiet"
POLL = 1.0  # seconds between attempts to reach a rebooting node and between /health tries
BOOT_ATTEMPT = 60  # seconds one attempt may wait for a rebooting node's boot to finish
# the boot marker's "booted" comes before NetworkManager has raised the data link and its MTU:
# the gate observes again for up to this long before it calls the boot failed, every GATE_POLL s
# (each observation is an SSH script with rpm: a failing gate makes no more than 30)
GATE_SETTLE = 60
GATE_POLL = 2.0
EXAMPLES = {"--kernel": "6.18.9-200.fc43", "--firmware": "20260110-1.fc43"}
# the os role's value the targets are given to its preflight as (roles/os/schema.py, Os.upgrade)
UPGRADE_DATA = host_name("os.upgrade")


@dataclass(frozen=True)
class Result:
    code: int
    out: str
    err: str


class Remote(Protocol):
    """Runs one shell script on a node as its SSH user; `what` names the step (the tests' key)."""

    def run(self, node: Node, what: str, script: str) -> Result: ...


@dataclass(frozen=True)
class Ssh:
    """The nodes over one shared connection each (the SSH config status and verify use)."""

    config: Path

    def run(self, node: Node, what: str, script: str) -> Result:
        argv = ["ssh", "-F", str(self.config), sshconfig.alias(node), "sh", "-s"]
        # a rebooting node's attempt is given up and made again; every other step bounds itself
        timeout = BOOT_ATTEMPT if what == "booted" else None
        try:
            found = subprocess.run(
                argv, input=script, capture_output=True, text=True, timeout=timeout
            )
        except subprocess.TimeoutExpired:
            return Result(124, "", f"no answer within {timeout} s")
        return Result(found.returncode, found.stdout, found.stderr)


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


def deploy_argv(targets: Targets) -> list[str]:
    """P1's deploy: no reboot (P2 reboots each node in its turn), and the targets as host data,
    so that the os role admits on a node the known-bad version they replace."""
    upgrade = f"{UPGRADE_DATA}={json.dumps(targets.packages())}"
    data = ["--data", "halo_reboot=never", "--data", upgrade]
    return [*project.PYINFRA, "-y", *data, "inventory.py", "deploy.py"]


def target_rule(option: str) -> options.Rule:
    """OPTION's rule in the parser: an EVR by rpm's ASCII grammar without the arch. A NEVRA's
    `.noarch` would pass the known-bad list's comparison and then install that very build, an
    Arabic-Indic digit would read as an epoch."""
    return functools.partial(rpmversion.problem, example=EXAMPLES[option])


class Stop(Exception):
    """The upgrade ends here with this exit code and line."""

    def __init__(self, code: int, line: str) -> None:
        super().__init__(line)
        self.code = code
        self.line = line


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


def order(cluster: Cluster) -> list[Node]:
    """Workers in config order, then the head: the head serves until every worker passed."""
    return [*cluster.workers, cluster.head]


@dataclass(frozen=True)
class Observed:
    """What the gate compares on a node, before its reboot and after."""

    running: str  # uname -r
    cmdline: str  # /proc/cmdline
    link: dict | None  # `ip -j link show dev IF`'s one entry, None when there is no such link
    rdma_active: bool  # `rdma link` has the data link's port ACTIVE
    gpu: tuple[str, ...]  # /dev/kfd and /dev/dri/renderD*
    firmware: str  # amd-gpu-firmware's EVR, "" when not installed


SECTION = "### "


def observe_script(interface: str) -> str:
    quoted = shlex.quote(interface)
    return "\n".join(
        (
            f"echo '{SECTION}running'; uname -r",
            f"echo '{SECTION}cmdline'; cat /proc/cmdline",
            f"echo '{SECTION}link'; ip -j link show dev {quoted} 2>/dev/null",
            f"echo '{SECTION}rdma'; rdma link 2>/dev/null",
            f"echo '{SECTION}gpu'; ls -1 /dev/kfd /dev/dri/renderD* 2>/dev/null",
            f"echo '{SECTION}firmware'; rpm -q --qf '%{{EVR}}\\n' {FIRMWARE} 2>/dev/null | "
            "grep -v 'not installed'",
            "true",
        )
    )


def sections(text: str) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    current: list[str] = []
    for line in text.splitlines():
        if line.startswith(SECTION):
            current = found.setdefault(line.removeprefix(SECTION), [])
        else:
            current.append(line)
    return found


def _json(lines: list[str]) -> list:
    try:
        return json.loads("\n".join(lines) or "[]")
    except ValueError:
        return []


def observed(text: str, interface: str) -> Observed:
    found = sections(text)
    links = _json(found.get("link", []))
    rdma = rdmatools.parse_rdma_link("\n".join(found.get("rdma", [])))
    return Observed(
        running="".join(found.get("running", [])).strip(),
        cmdline="".join(found.get("cmdline", [])).strip(),
        link=links[0] if links else None,
        rdma_active=any(p["netdev"] == interface and p["state"] == "ACTIVE" for p in rdma),
        gpu=tuple(sorted(line for line in found.get("gpu", []) if line)),
        firmware="".join(found.get("firmware", [])).strip(),
    )


def without_arch(release: str) -> str:
    """`uname -r`'s VERSION-RELEASE.ARCH as the EVR rpm prints (no epoch on Fedora's kernels)."""
    return release.rsplit(".", 1)[0]


def gate_failure(
    cluster: Cluster, interface: str, targets: Targets, before: Observed, after: Observed
) -> str | None:
    """The first check the node fails after its trial boot, in words; None when it passes."""
    if targets.kernel and without_arch(after.running) != targets.kernel:
        return f"uname -r is {after.running or 'empty'}, not {targets.kernel}"
    missing = cmdline.missing_args(
        after.cmdline, list(cluster.kernel.args), list(cluster.kernel.args_remove)
    )
    if missing:
        return f"kernel arguments not active: {' '.join(missing)}"
    if after.link is None:
        return f"data link {interface} is missing"
    if "UP" not in after.link.get("flags", []) or after.link.get("operstate") == "DOWN":
        return f"data link {interface} is DOWN"
    mtu = cluster.settings["mtu"]
    if after.link.get("mtu") != mtu:
        return f"data link {interface} has MTU {after.link.get('mtu')}, not {mtu}"
    if before.rdma_active and not after.rdma_active:
        return "no RDMA device is ACTIVE (one was before the reboot)"
    lost = sorted(set(before.gpu) - set(after.gpu))
    if lost:
        return f"GPU devices missing: {' '.join(lost)}"
    if targets.firmware and after.firmware != targets.firmware:
        return f"{FIRMWARE} is {after.firmware or 'not installed'}, not {targets.firmware}"
    return None


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


@dataclass
class Upgrade:
    """One run: the cluster, its nodes' answers, and the history it appends on the head."""

    cluster: Cluster
    targets: Targets
    remote: Remote
    deploy: Callable[[], int]
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep
    # the image upgrade's completion gate (remote.Remote.completion: one completion with the
    # configured model), why it failed or None; None here: no model is asked (unit tests)
    completion: Callable[[], str | None] | None = None

    def run(self, node: Node, what: str, script: str) -> Result:
        return self.remote.run(node, what, script)

    def history(self, event: str, **fields) -> None:
        """One line appended to the head's history as the cluster user (a failed append is a
        warning: the upgrade's state is the nodes', the history its record)."""
        line = shlex.quote(locks.history_line(event, **fields))
        user = shlex.quote(self.cluster.cluster_user)
        path = f"~{self.cluster.cluster_user}/{locks.HISTORY}"
        script = (
            f'runuser -u {user} -- sh -c \'mkdir -p "$(dirname {path})" && '
            f'printf "%s\\n" "$1" >> {path}\' sh {line}'
        )
        if self.run(self.cluster.head, "history", script).code != 0:
            print(f"warning: {self.cluster.head.name}: history line {event} not written")

    # P0
    def read_all(self) -> dict[str, NodeRead]:
        """Every node's versions, data interface, boot entries and default entry; an unreachable
        node refuses."""
        found = {}
        for node in self.cluster.nodes:
            script = (
                f"{versions_command()}\n"
                f"echo \"iface $(ip -o -4 addr show to {node.address} | awk '{{print $2}}')\"\n"
                f'echo "saved $({SAVED_ENTRY})"\n'
                f"ls -1 {ENTRIES} | sed 's/^/entry /'"
            )
            result = self.run(node, "read", script)
            if result.code == 255:  # ssh's own failure: said as every command says it
                raise Stop(REFUSED, reach.line(node, result.err))
            if result.code != 0:
                raise Stop(REFUSED, f"{node.name}: unreachable: {result.err.strip()[-200:]}")
            lines = result.out.splitlines()
            interface = next((ln.split()[1] for ln in lines if ln.startswith("iface ")), "")
            if not interface:
                raise Stop(REFUSED, f"{node.name}: no interface has {node.address}: deploy first")
            entries = [ln.split(" ", 1)[1] for ln in lines if ln.startswith("entry ")]
            saved = next((ln[6:].strip() for ln in lines if ln.startswith("saved ")), "")
            found[node.name] = NodeRead(versions_process(lines), interface, entries, saved)
        return found

    def locks_wanted(self) -> bool:
        return bool(self.cluster.settings["os.lock"])

    def kept_default(self, read: NodeRead) -> str | None:
        """The entry P1 keeps as the default: the running kernel's, unless the node runs the
        target kernel without having passed its gate (a run stopped at its trial boot, exit 7):
        then the default it had, so that an ungated kernel never becomes the default."""
        running = entry_id(read.entries, read.info["running"])
        ungated = self.targets.kernel == without_arch(read.info["running"]) and (
            read.saved != running
        )
        if ungated and f"{read.saved}.conf" in read.entries:
            return read.saved
        return running

    def done(self, read: NodeRead) -> bool:
        """The node runs the targets and its default is the running kernel (it passed its gate in
        an earlier run): no reboot."""
        return self.already(read.info) and read.saved == entry_id(
            read.entries, read.info["running"]
        )

    def new_release(self, info: VersionsInfo) -> str:
        old = info["running"]
        return f"{self.targets.kernel}.{old.rsplit('.', 1)[1]}" if self.targets.kernel else old

    def checked(self, node: Node, what: str, script: str, step: str) -> Result:
        """A step whose failure stops the upgrade here (exit 5) with the step and its stderr."""
        result = self.run(node, what, script)
        if result.code != 0:
            err = (result.err.strip().splitlines() or [f"exit {result.code}"])[-1]
            raise Stop(ABORTED, f"{node.name}: {step} failed: {err}")
        return result

    # P1
    def prepare(self, reads: dict[str, NodeRead]) -> dict[str, str]:
        """The targets installed on every node at once; each node's new entry id (kernel
        targets), checked here so that a missing entry stops before any node reboots."""
        new_ids: dict[str, str] = {}

        def one(node: Node) -> str | None:
            read = reads[node.name]
            info = read.info
            default = self.kept_default(read)
            if default is None:
                return f"{node.name}: no boot entry of the running kernel {info['running']}"
            if self.locks_wanted():
                names = [*kernel_names(info), *firmware_names(info)]
                self.run(node, "unlock", f"{DNF} versionlock delete {' '.join(names)} || true")
            if self.targets.kernel:  # the firmware waits for the node's turn (firmware_script)
                result = self.run(node, "install", prepare_script(info, self.targets, default))
                if result.code != 0:
                    return f"{node.name}: {result.err.strip()[-300:] or 'dnf install failed'}"
                installed = kernel_specs(info, self.targets)
                self.history("os-prepared", node=node.name, installed=installed)
                release = self.new_release(info)
                listed = self.run(node, "entries", f"ls -1 {ENTRIES}").out.split()
                new_id = entry_id(listed, release)
                if new_id is None:
                    return f"{node.name}: no boot entry for {release} after install"
                new_ids[node.name] = new_id
            return None

        with ThreadPoolExecutor(len(self.cluster.nodes)) as pool:
            failed = [f for f in pool.map(one, self.cluster.nodes) if f]
        if not failed and self.deploy() != 0:
            failed = ["the deploy (reboot: never) failed"]
        if self.locks_wanted():
            for node in self.cluster.nodes:
                info = reads[node.name].info
                specs = running_specs(info) + ([] if failed else install_specs(info, self.targets))
                names = [*kernel_names(info), *firmware_names(info)]
                locked = self.run(node, "locks", locks_script(names, specs))
                if locked.code != 0:
                    failed.append(f"{node.name}: the locks: {locked.err.strip()[-200:]}")
        if failed:
            raise Stop(ABORTED, f"prepare failed: {'; '.join(failed)}: no node rebooted")
        return new_ids

    # P2
    def reboot(self, node: Node, why: str) -> None:
        """Reboot and wait for the new boot (the reboot role's marker), or stop with 7."""
        # without the marker the old boot would pass for the new one
        self.checked(node, "mark", boot.MARK, "the boot marker")
        self.run(node, "reboot", boot.REBOOT)  # its SSH session may end with the node: no code
        timeout = self.cluster.settings["reboot_timeout"]
        deadline = self.clock() + timeout
        self.sleep(POLL)
        while self.clock() < deadline:
            if self.run(node, "booted", boot.BOOTED).code == 0:
                return
            self.sleep(POLL)
        raise Stop(NOT_BACK, f"{node.name} did not come back within {timeout} s {why}")

    def serving(self) -> bool:
        if not self.cluster.settings["serve.enabled"]:
            return True
        url = shlex.quote(f"{self.cluster.serve.head_url}/health")
        tries = max(1, int(self.cluster.settings["serve.ready_timeout"] / POLL))
        script = (
            f"for i in $(seq {tries}); do curl -sf -o /dev/null {url} && exit 0; "
            f"sleep {POLL:g}; done; exit 1"
        )
        return self.run(self.cluster.head, "serving", script).code == 0

    def gate(self, node: Node, interface: str, before: Observed) -> tuple[Observed, str | None]:
        """The gate's observation, made again every GATE_POLL seconds for up to GATE_SETTLE
        while it fails (the data link and its MTU come up after the boot marker): the last one."""
        tries = max(1, int(GATE_SETTLE / GATE_POLL))
        for attempt in range(1, tries + 1):
            after = observed(self.run(node, "observe", observe_script(interface)).out, interface)
            failed = gate_failure(self.cluster, interface, self.targets, before, after)
            if failed is None or attempt == tries:
                return after, failed
            self.sleep(GATE_POLL)
        raise AssertionError("unreachable: the last attempt returns")

    def trial(self, node: Node, read: NodeRead, new_id: str | None) -> None:
        info, interface = read.info, read.interface
        before = observed(self.run(node, "observe", observe_script(interface)).out, interface)
        default = self.kept_default(read)
        # the kernel a revert boots: the default's (the running one's, unless it is ungated)
        old = default.split("-", 1)[1] if default else info["running"]
        new_release = self.new_release(info)
        if self.targets.firmware:
            script = firmware_script(info, self.targets, new_release)
            self.checked(node, "firmware", script, "installing the firmware")
            installed = firmware_specs(info, self.targets)
            self.history("os-prepared", node=node.name, installed=installed)
        if new_id:
            self.checked(node, "one-time", f"grub2-reboot {shlex.quote(new_id)}", "grub2-reboot")
            self.history("os-trial", node=node.name, entry=new_id)
        back = (
            f"it boots {without_arch(old)} (its default)"
            if new_id
            else f"`dnf downgrade {ROLLBACK}/*.rpm` returns its firmware"
        )
        self.reboot(node, f"from its trial boot of {new_release}: power-cycle it; {back}")
        after, failed = self.gate(node, interface, before)
        if failed is None and not self.serving():
            failed = f"not serving again within {self.cluster.settings['serve.ready_timeout']} s"
        if failed is None and self.cluster.settings["serve.enabled"] and self.completion:
            problem = self.completion()
            failed = f"no completion after the reboot: {problem}" if problem else None
        self.history(
            "os-gate",
            node=node.name,
            passed=failed is None,
            failed_check=failed,
            running=after.running,
        )
        if failed:
            self.revert(node, old, after.running, failed)
        if new_id:
            promote = f"grub2-set-default {shlex.quote(new_id)}"
            self.checked(node, "promote", promote, "grub2-set-default")
        if self.locks_wanted():
            names = [*kernel_names(info), *firmware_names(info)]
            script = locks_script(names, self.promoted_specs(info))
            self.checked(node, "locks", script, "moving the locks")
        self.history(
            "os-promoted",
            node=node.name,
            kernel=self.targets.kernel,
            firmware=self.targets.firmware,
        )
        self.remove_bad(node, info)

    def remove_bad(self, node: Node, info: VersionsInfo) -> None:
        """A kernel upgrade's last repair on a node that runs the target, gated: the kernels the
        list calls bad removed (P1's deploy admitted them for this; the next would refuse them)."""
        bad = [
            evr
            for evr in installed(info, KERNEL)
            if self.targets.kernel
            and getattr(self.cluster.os.judged(KERNEL, evr), "verdict", None) == "bad"
        ]
        if bad:
            specs = [f"{KERNEL}-{evr}" for evr in bad]
            script = f"{DNF} remove {' '.join(specs)}"
            self.checked(node, "remove-bad", script, "removing the known-bad kernels")
            self.history("os-removed", node=node.name, removed=specs)

    def already(self, info: VersionsInfo) -> bool:
        """The node runs the target kernel and has the target firmware."""
        kernel = self.targets.kernel in (None, without_arch(info["running"]))
        return kernel and self.targets.firmware in (None, *installed(info, FIRMWARE))

    def promoted_specs(self, info: VersionsInfo) -> list[str]:
        running = running_specs(info)
        kernel = [s for s in running if not s.startswith(FIRMWARE_PACKAGES)]
        firmware = [s for s in running if s.startswith(FIRMWARE_PACKAGES)]
        if self.targets.kernel:
            kernel = [f"{n}-{self.targets.kernel}" for n in kernel_names(info)]
        if self.targets.firmware:
            firmware = [f"{n}-{self.targets.firmware}" for n in firmware_names(info)]
        return kernel + firmware

    def revert(self, node: Node, old: str, booted: str, failed: str) -> None:
        """Back to the previous kernel (the default: the one-time entry is used up) and, for a
        firmware target, the saved firmware; then stop with 6, touching no other node (the line
        says which kernel it came back on when that is not the old one)."""
        if self.targets.firmware:
            self.run(node, "firmware-back", FIRMWARE_BACK)
        self.reboot(node, f"from its revert to {without_arch(old)}: power-cycle it")
        back = self.run(node, "running", "uname -r").out.strip()
        self.history("os-reverted", node=node.name, running=back)
        where = f"back on {without_arch(back)}" if back == old else f"running {back}, not {old}"
        line = f"{node.name}: gate failed after booting {without_arch(booted)}: {failed}; {where}"
        raise Stop(GATE_FAILED, line)

    def upgrade(self) -> int:
        nodes = order(self.cluster)
        try:
            refused = judge_targets(self.cluster, self.targets)
            if refused:
                raise Stop(REFUSED, "; ".join(refused))
            reads = self.read_all()
            if self.targets.firmware:
                for node in nodes:
                    back = self.run(node, "backup", firmware_backup_script(reads[node.name].info))
                    if back.code != 0:
                        raise Stop(
                            REFUSED,
                            f"{node.name}: the running firmware's RPMs cannot "
                            f"be downloaded for the way back: {back.err.strip()[-200:]}",
                        )
            self.history(
                "os-started",
                kernel=self.targets.kernel,
                firmware=self.targets.firmware,
                nodes=[n.name for n in nodes],
            )
            new_ids = self.prepare(reads)
            for node in nodes:
                read = reads[node.name]
                if self.done(read):  # a run again after one that stopped: no reboot
                    print(f"{node.name}: already runs {self.targets.describe()}")
                    self.remove_bad(node, read.info)
                    continue
                self.trial(node, read, new_ids.get(node.name))
        except Stop as stop:
            print(stop.line, file=sys.stderr)
            if stop.code != REFUSED:
                self.history("os-ended", result=stop.code, reason=stop.line)
            return stop.code
        self.history("os-ended", result=OK, reason="every node passed")
        print(f"upgraded {', '.join(n.name for n in nodes)} to {self.targets.describe()}")
        return OK


def main(args: list[str]) -> int:
    parser = options.parser("halo-cluster upgrade --os", __doc__, REFUSED)
    parser.flag("--os", "the kernel and firmware, not the image", required=True)
    parser.value(
        "--kernel", "VERSION", "kernel-core's EVR, 6.18.9-200.fc43", rule=target_rule("--kernel")
    )
    parser.value(
        "--firmware", "VERSION", "amd-gpu-firmware's, 20260110-1.fc43",
        rule=target_rule("--firmware"),
    )  # fmt: skip
    # each refused in one line with exit 1 before the config is read
    parsed = parser.parse_args(args)
    if not (parsed.kernel or parsed.firmware):
        parser.error("give --kernel VERSION, --firmware VERSION or both")
    cluster = project.load_or_say(project.config())
    if cluster is None:
        return REFUSED
    found = project.files()
    if found is None:
        print("halo-cluster upgrade: no deploy.py to run: reinstall the package", file=sys.stderr)
        return REFUSED

    targets = Targets(parsed.kernel, parsed.firmware)

    def deploy() -> int:
        env = dict(os.environ, CLUSTER_CONFIG=os.path.abspath(project.config()))
        return subprocess.run(deploy_argv(targets), cwd=found.entry, env=env).returncode

    with (
        tempfile.TemporaryDirectory(prefix="halo-upgrade-") as folder,
        remote.Remote(cluster, project.config(), found) as reach,
    ):
        nodes = Ssh(sshconfig.write(cluster, Path(folder)))
        return Upgrade(cluster, targets, nodes, deploy, completion=reach.completion).upgrade()

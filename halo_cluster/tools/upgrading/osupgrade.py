"""`halo-cluster upgrade --os [--kernel VERSION] [--firmware VERSION]`'s phases: a new kernel and
firmware on every node (or, `--partial`, the chosen ones), each node booting the new kernel once
before it keeps it (docs/kernel-upgrades.md, docs/design/day-after.md section 6).

P0 refuses a known-bad target and reads every node; P1 installs the kernel target on every node
at once, keeps each node's default boot entry on its running kernel and runs the deploy without
reboots; P2 takes the workers in config order, then the head: the firmware target installed
(with its initramfs), `grub2-reboot` into the new entry, reboot, gate (osgate.py); passed:
`grub2-set-default`, locks moved; failed: reboot into the old default (the one-time entry is
used up), stop. Exit codes as docs/ci.md: 0, 1 refused, 5 a step failed (in P1: before any
reboot), 6 a gate failed (that node rebooted into its old default), 7 a node did not come back.
The steps run on a `machine.Reach` (nodes.Nodes; tests/unit/helpers_upgrade.py's fake).
"""

from __future__ import annotations

import shlex
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from halo_cluster.config.model import Cluster, Node
from halo_cluster.node import boot
from halo_cluster.node.versions import KERNEL, VersionsInfo, installed
from halo_cluster.tools import reach
from halo_cluster.tools.transport import Result
from halo_cluster.tools.upgrading.kernels import (
    DNF,
    ENTRIES,
    FIRMWARE_BACK,
    ROLLBACK,
    NodeRead,
    Targets,
    deploy_data,
    done,
    entry_id,
    firmware_backup_script,
    firmware_names,
    firmware_script,
    firmware_specs,
    install_specs,
    judge_targets,
    kept_default,
    kernel_names,
    kernel_specs,
    locks_script,
    new_release,
    node_read,
    order,
    prepare_script,
    promoted_specs,
    read_script,
    running_specs,
    without_arch,
)
from halo_cluster.tools.upgrading.machine import (
    ABORTED,
    NOT_SERVING,
    OK,
    REFUSED,
    ROLLED_BACK,
    STEP_SECONDS,
    Reach,
    Stop,
    record,
)
from halo_cluster.tools.upgrading.nodes import READ_SECONDS
from halo_cluster.tools.upgrading.osgate import (
    GATE_POLL,
    GATE_SETTLE,
    Observed,
    gate_failure,
    observe_script,
    observed,
)

PROG = "halo-cluster upgrade --os"  # the start of each line it says

POLL = 1.0  # seconds between attempts to reach a rebooting node
BOOT_ATTEMPT = 60  # seconds one attempt may wait for a rebooting node's boot to finish


def stays(names: Sequence[str]) -> str:
    """The line for the nodes a partial upgrade leaves on what they run."""
    verb = "stays" if len(names) == 1 else "stay"
    return f"{', '.join(names)} {verb} on the old kernel and firmware"


@dataclass
class Upgrade:
    """One run: the cluster, its nodes' answers, and the history it appends on the head."""

    cluster: Cluster
    targets: Targets
    reach: Reach
    # the nodes to upgrade (`--partial`: some), None: every node
    chosen: Sequence[Node] | None = None
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep

    @property
    def nodes(self) -> list[Node]:
        return list(self.cluster.nodes if self.chosen is None else self.chosen)

    def left_out(self) -> list[str]:
        kept = {n.name for n in self.nodes}
        return [n.name for n in self.cluster.nodes if n.name not in kept]

    def limit(self) -> list[str]:
        """The deploy's `--limit`: the chosen nodes when some are left out, else none."""
        return [n.name for n in self.nodes] if self.left_out() else []

    def run(self, node: Node, what: str, script: str, timeout: float = STEP_SECONDS) -> Result:
        return self.reach.run(node, what, script, timeout)

    def history(self, event: str, **fields: object) -> None:
        record(self.reach, event, **fields)

    # P0
    def read_all(self) -> dict[str, NodeRead]:
        """Every node's versions, data interface, boot entries and default entry; an unreachable
        node refuses, after every node was tried and each one down said in its line."""
        found, down = {}, []
        for node in self.nodes:
            result = self.run(node, "read", read_script(node), READ_SECONDS)
            if not result.reached:  # ssh's own failure: said as every command says it
                print(f"{PROG}: {reach.said(node, result.reason)}", file=sys.stderr)
                down.append(node.name)
                continue
            if result.code != 0:
                raise Stop(REFUSED, f"{node.name}: unreachable: {result.err.strip()[-200:]}")
            read = node_read(result.out)
            if read is None:
                raise Stop(REFUSED, f"{node.name}: no interface has {node.address}: deploy first")
            found[node.name] = read
        if down:
            unreached = ", ".join(down)
            raise Stop(REFUSED, f"{PROG}: stopped before anything changed: {unreached} (above)")
        return found

    def locks_wanted(self) -> bool:
        return bool(self.cluster.settings["os.lock"])

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
            default = kept_default(read, self.targets)
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
                release = new_release(info, self.targets)
                listed = self.run(node, "entries", f"ls -1 {ENTRIES}").out.split()
                new_id = entry_id(listed, release)
                if new_id is None:
                    return f"{node.name}: no boot entry for {release} after install"
                new_ids[node.name] = new_id
            return None

        with ThreadPoolExecutor(len(self.nodes)) as pool:
            failed = [f for f in pool.map(one, self.nodes) if f]
        if not failed and self.reach.deploy(deploy_data(self.targets), self.limit()) != 0:
            failed = ["the deploy (reboot: never) failed"]
        if self.locks_wanted():
            for node in self.nodes:
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
            if self.run(node, "booted", boot.BOOTED, BOOT_ATTEMPT).ok:
                return
            self.sleep(POLL)
        raise Stop(NOT_SERVING, f"{node.name} did not come back within {timeout} s {why}")

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
        default = kept_default(read, self.targets)
        # the kernel a revert boots: the default's (the running one's, unless it is ungated)
        old = default.split("-", 1)[1] if default else info["running"]
        release = new_release(info, self.targets)
        if self.targets.firmware:
            script = firmware_script(info, self.targets, release)
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
        self.reboot(node, f"from its trial boot of {release}: power-cycle it; {back}")
        after, failed = self.gate(node, interface, before)
        failed = failed or self.reach.rejoin()
        if failed is None and not self.reach.serving():
            failed = f"not serving again within {self.cluster.settings['serve.ready_timeout']} s"
        if failed is None and self.cluster.settings["serve.enabled"]:
            problem = self.reach.completion()
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
            script = locks_script(names, promoted_specs(info, self.targets))
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

    def revert(self, node: Node, old: str, booted: str, failed: str) -> None:
        """Back to the previous kernel (the default: the one-time entry is used up) and, for a
        firmware target, the saved firmware; then stop with 6, touching no other node (the line
        says which kernel it came back on when that is not the old one)."""
        if self.targets.firmware:
            self.run(node, "firmware-back", FIRMWARE_BACK)
        self.reboot(node, f"from its revert to {without_arch(old)}: power-cycle it")
        self.reach.rejoin()  # the line that stops says the gate's failure, this serves again
        back = self.run(node, "running", "uname -r").out.strip()
        self.history("os-reverted", node=node.name, running=back)
        where = f"back on {without_arch(back)}" if back == old else f"running {back}, not {old}"
        line = f"{node.name}: gate failed after booting {without_arch(booted)}: {failed}; {where}"
        raise Stop(ROLLED_BACK, line)

    def upgrade(self) -> int:
        nodes = order(self.nodes)
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
                if done(read, self.targets):  # a run again after one that stopped: no reboot
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
        if out := self.left_out():
            print(f"{stays(out)} (left out: --partial)")
        return OK

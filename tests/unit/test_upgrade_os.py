"""`halo-cluster upgrade --os`'s phases (halo_cluster/tools/upgrading/osupgrade.py) on the fake
cluster's simulated nodes (tests/unit/helpers_upgrade.py: each step's script answered as GRUB,
kernel-install and dnf would, the one-time entry used up at the boot that reads it, saved_entry
otherwise), and `--partial`; the gate on recorded outputs and the scripts: test_os_scripts.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from halo_cluster.node.versions import versions_process
from halo_cluster.tools import project, reach, transport
from halo_cluster.tools.transport import SSH_FAILED, Result
from halo_cluster.tools.upgrading import kernels, machine, osgate, osmain, osupgrade
from halo_cluster.tools.upgrading.kernels import Targets
from halo_cluster.tools.upgrading.machine import ABORTED, NOT_SERVING, OK, REFUSED, ROLLED_BACK
from halo_cluster.tools.upgrading.osupgrade import Upgrade
from tests.recorded import versions_output
from tests.unit.configs import VALID_ROCE
from tests.unit.helpers_upgrade import (
    FIRMWARE,
    GOOD_FIRMWARE,
    INTERFACE,
    NEW,
    OLD,
    Answer,
    FakeCluster,
    SimNode,
    cluster_of,
    entry,
)

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def cluster(tmp_path: Path):
    return cluster_of(tmp_path)


def upgrade(cluster, sim: FakeCluster, targets: Targets, chosen=None) -> int:
    return Upgrade(cluster, targets, sim, chosen, sleep=lambda _: None).upgrade()


def reboots(sim: FakeCluster) -> list[str]:
    return [name for name, what in sim.calls if what == "reboot"]


def test_workers_first_then_the_head(cluster) -> None:
    assert [n.name for n in kernels.order(cluster.nodes)] == ["halo2", "halo1"]


def test_a_good_kernel_boots_once_on_the_worker_then_the_head_and_becomes_the_default(
    cluster,
) -> None:
    sim = FakeCluster.of(cluster)
    assert upgrade(cluster, sim, Targets(NEW, None)) == OK
    assert reboots(sim) == ["halo2", "halo1"]
    # once, after every node installed, before any reboot, on every node
    assert sim.deploys == [(kernels.deploy_data(Targets(NEW, None)), [])]
    for node in sim.nodes.values():
        assert (node.running, node.saved, node.next, node.boots) == (NEW, entry(NEW), "", 1)
    events = [(line["event"], line.get("node")) for line in sim.history]
    assert events[0] == ("os-started", None) and events[-1] == ("os-ended", None)
    assert events.index(("os-promoted", "halo2")) < events.index(("os-trial", "halo1"))


def test_a_run_again_reboots_only_the_nodes_not_yet_upgraded(cluster) -> None:
    sim = FakeCluster.of(cluster)
    worker = sim.nodes["halo2"]
    worker.running, worker.kernels, worker.saved = NEW, [*worker.kernels, NEW], entry(NEW)
    assert upgrade(cluster, sim, Targets(NEW, None)) == OK
    assert reboots(sim) == ["halo1"]


def test_the_install_keeps_the_default_on_the_running_kernel(cluster) -> None:
    """kernel-install moved saved_entry to the new kernel: a power cut before the trial boots
    the old one."""
    sim = FakeCluster.of(cluster)
    run = Upgrade(cluster, Targets(NEW, None), sim, sleep=lambda _: None)
    run.prepare(run.read_all())
    assert {n.saved for n in sim.nodes.values()} == {entry(OLD)}
    assert "reboot" not in [what for _, what in sim.calls]


def test_a_broken_kernel_stops_at_the_first_worker_which_boots_its_old_default(
    cluster, capsys
) -> None:
    sim = FakeCluster.of(cluster, broken=(NEW,))
    assert upgrade(cluster, sim, Targets(NEW, None)) == ROLLED_BACK
    worker, head = sim.nodes["halo2"], sim.nodes["halo1"]
    assert reboots(sim) == ["halo2", "halo2"]  # the trial, then back: the head never
    assert (worker.running, worker.saved, worker.next) == (OLD, entry(OLD), "")
    assert (head.running, head.saved, head.boots) == (OLD, entry(OLD), 0)
    assert "promote" not in worker.scripts + head.scripts
    assert capsys.readouterr().err.strip() == (
        f"halo2: gate failed after booting {NEW}: data link {INTERFACE} is DOWN; back on {OLD}"
    )
    gate = next(line for line in sim.history if line["event"] == "os-gate")
    assert (gate["node"], gate["passed"]) == ("halo2", False)
    assert sim.history[-1]["event"] == "os-ended" and sim.history[-1]["result"] == 6


class HangingNode(SimNode):
    """A node whose trial boot never finishes."""

    def answer(self, what: str, script: str) -> Answer:
        return Answer(1, "", "") if what == "booted" else super().answer(what, script)


def test_a_node_that_does_not_come_back_is_7_naming_its_default(cluster, capsys) -> None:
    sim = FakeCluster.of(cluster)
    sim.nodes["halo2"] = HangingNode("halo2", " ".join(cluster.kernel.args))
    clock = iter(range(0, 10_000, 100))
    run = Upgrade(cluster, Targets(NEW, None), sim, clock=lambda: next(clock), sleep=lambda _: 0)
    assert run.upgrade() == NOT_SERVING
    err = capsys.readouterr().err
    assert f"halo2 did not come back within 600 s from its trial boot of {NEW}.x86_64" in err
    assert f"it boots {OLD} (its default)" in err
    assert "halo1" not in reboots(sim)


def test_a_known_bad_target_is_refused_before_any_node_is_read(cluster, capsys) -> None:
    sim = FakeCluster.of(cluster)
    assert upgrade(cluster, sim, Targets(None, "20251125-1.fc43")) == REFUSED
    assert sim.calls == []
    err = capsys.readouterr().err
    assert "amd-gpu-firmware 20251125-1.fc43 is known bad: MES firmware 0x83" in err


def test_an_unknown_target_is_on_your_judgement(cluster, capsys) -> None:
    assert kernels.judge_targets(cluster, Targets("6.18.16-200.fc43", None)) == []
    assert "not in the known-versions list: on your judgement" in capsys.readouterr().out


def test_locks_move_with_the_promotion(cluster) -> None:
    info = versions_process(
        versions_output(
            f"{OLD}.x86_64", [f"kernel-core-{OLD}.x86_64", f"amd-gpu-firmware-{FIRMWARE}.noarch"]
        )
    )
    assert kernels.running_specs(info) == [f"kernel-core-{OLD}", f"amd-gpu-firmware-{FIRMWARE}"]
    assert kernels.install_specs(info, Targets(NEW, "20260110-1.fc43")) == [
        f"kernel-core-{NEW}",
        "amd-gpu-firmware-20260110-1.fc43",
    ]


class LateLinkNode(SimNode):
    """A node whose data link NetworkManager raises a few observations after the boot."""

    late: int = 3

    def answer(self, what: str, script: str) -> Answer:
        if what == "reboot":
            self.late = 3
        if what == "observe" and self.boots and self.late:
            self.late -= 1
            return Answer(0, self.observed(up=False), "")
        return super().answer(what, script)


def test_the_gate_observes_again_until_the_link_is_up(cluster) -> None:
    sim = FakeCluster.of(cluster)
    sim.nodes["halo2"] = LateLinkNode("halo2", " ".join(cluster.kernel.args))
    assert upgrade(cluster, sim, Targets(NEW, None)) == OK
    assert sim.nodes["halo2"].saved == entry(NEW)


def test_a_link_that_stays_down_fails_after_the_settle_bound(cluster) -> None:
    sim = FakeCluster.of(cluster, broken=(NEW,))
    assert upgrade(cluster, sim, Targets(NEW, None)) == ROLLED_BACK
    observes = sim.nodes["halo2"].scripts.count("observe")
    assert observes == 1 + osgate.GATE_SETTLE / osgate.GATE_POLL  # before, each try


class FailingNode(SimNode):
    """A node where one step's command fails with a line on stderr."""

    fails: str = ""

    def answer(self, what: str, script: str) -> Answer:
        if what == self.fails:
            self.scripts.append(what)
            return Answer(1, "", f"{what}: error: no space left on device\n")
        return super().answer(what, script)


@pytest.mark.parametrize(
    ("step", "named", "rebooted"),
    [
        ("one-time", "grub2-reboot", []),
        ("mark", "the boot marker", []),
        ("promote", "grub2-set-default", ["halo2"]),
    ],
)
def test_a_failed_boot_loader_step_stops_with_its_stderr_and_promotes_nothing(
    cluster, capsys, step: str, named: str, rebooted: list[str]
) -> None:
    sim = FakeCluster.of(cluster)
    worker = FailingNode("halo2", " ".join(cluster.kernel.args))
    worker.fails = step
    sim.nodes["halo2"] = worker
    assert upgrade(cluster, sim, Targets(NEW, None)) == ABORTED
    assert capsys.readouterr().err == (
        f"halo2: {named} failed: {step}: error: no space left on device\n"
    )
    assert reboots(sim) == rebooted
    assert "os-promoted" not in [line["event"] for line in sim.history]
    assert sim.history[-1]["result"] == ABORTED


def test_a_failed_lock_stops_before_the_promotion_is_recorded(cluster, capsys) -> None:
    cluster.settings["os.lock"] = True
    sim = FakeCluster.of(cluster)
    run = Upgrade(cluster, Targets(NEW, None), sim, sleep=lambda _: None)
    reads = run.read_all()
    new_ids = run.prepare(reads)
    worker = FailingNode("halo2", " ".join(cluster.kernel.args))
    worker.fails, worker.kernels = "locks", [*sim.nodes["halo2"].kernels]
    sim.nodes["halo2"] = worker
    with pytest.raises(machine.Stop) as stop:
        run.trial(cluster.workers[0], reads["halo2"], new_ids["halo2"])
    assert (
        stop.value.line == "halo2: moving the locks failed: locks: error: no space left on device"
    )
    assert "os-promoted" not in [line["event"] for line in sim.history]


def test_a_run_after_an_ungated_boot_gates_the_node_and_keeps_its_default_until_then(
    cluster,
) -> None:
    """Exit 7, then the node came up on its trial kernel: it runs the target, its default is
    the old one; a run again must neither skip it nor make the running kernel the default."""
    sim = FakeCluster.of(cluster, broken=(NEW,))
    worker = sim.nodes["halo2"]
    worker.running, worker.kernels = NEW, [*worker.kernels, NEW]  # saved: the old entry
    assert upgrade(cluster, sim, Targets(NEW, None)) == ROLLED_BACK
    assert reboots(sim) == ["halo2", "halo2"]
    assert (worker.running, worker.saved) == (OLD, entry(OLD))
    assert "promote" not in worker.scripts


def test_a_missing_boot_entry_after_install_is_5_before_any_reboot(cluster, capsys) -> None:
    sim = FakeCluster.of(cluster)
    head = sim.nodes["halo1"]
    head.answer = lambda what, script: (  # type: ignore[method-assign]
        Answer(0, f"{entry(OLD)}.conf\n", "")
        if what == "entries"
        else SimNode.answer(head, what, script)
    )
    assert upgrade(cluster, sim, Targets(NEW, None)) == ABORTED
    assert reboots(sim) == []
    assert capsys.readouterr().err.strip() == (
        f"prepare failed: halo1: no boot entry for {NEW}.x86_64 after install: no node rebooted"
    )


class ThirdKernelNode(SimNode):
    """A node whose revert boots neither the trial kernel nor its old default."""

    def answer(self, what: str, script: str) -> Answer:
        if what == "reboot" and self.boots:
            self.running, self.boots = "6.18.5-200.fc43", self.boots + 1
            return Answer(0, "", "")
        return super().answer(what, script)


def test_a_revert_landing_on_a_third_kernel_is_6_naming_it(cluster, capsys) -> None:
    sim = FakeCluster.of(cluster)
    sim.nodes["halo2"] = ThirdKernelNode("halo2", " ".join(cluster.kernel.args), broken=(NEW,))
    assert upgrade(cluster, sim, Targets(NEW, None)) == ROLLED_BACK
    assert (
        capsys.readouterr()
        .err.strip()
        .endswith(f"running 6.18.5-200.fc43.x86_64, not {OLD}.x86_64")
    )
    assert "halo1" not in reboots(sim)


def test_the_gate_asks_the_image_upgrade_s_completion_after_each_reboot(
    tmp_path: Path, capsys
) -> None:
    """/health answers before the model does: the image upgrade's completion decides."""
    path = tmp_path / "serving.yml"
    path.write_text(f"{VALID_ROCE}serve:\n  enabled: true\n  model: facebook/opt-125m\n")
    cluster = project.load(path)
    sim = FakeCluster.of(cluster)
    answers = iter([None, "HTTP 503: model not loaded"])
    asked: list[str] = []

    def completion() -> str | None:
        asked.append(reboots(sim)[-1])
        return next(answers)

    sim.completion = completion  # type: ignore[method-assign]
    run = Upgrade(cluster, Targets(NEW, None), sim, sleep=lambda _: None)
    assert run.upgrade() == ROLLED_BACK
    assert asked == ["halo2", "halo1"]
    assert capsys.readouterr().err.strip() == (
        f"halo1: gate failed after booting {NEW}: no completion after the reboot: "
        f"HTTP 503: model not loaded; back on {OLD}"
    )


def test_a_firmware_upgrade_installs_on_each_node_in_its_own_turn(cluster) -> None:
    sim = FakeCluster.of(cluster)
    assert upgrade(cluster, sim, Targets(None, GOOD_FIRMWARE)) == OK
    steps = [(name, what) for name, what in sim.calls if what in ("install", "firmware", "reboot")]
    assert steps == [
        ("halo2", "firmware"),
        ("halo2", "reboot"),
        ("halo1", "firmware"),
        ("halo1", "reboot"),
    ]
    assert {n.firmware for n in sim.nodes.values()} == {GOOD_FIRMWARE}


def test_a_failed_firmware_gate_leaves_every_other_node_s_firmware_alone(cluster) -> None:
    """Firmware applies to every kernel: installed on every node in P1, it was on the head
    (and loaded at its next boot) although the first worker failed its gate."""
    sim = FakeCluster.of(cluster, broken=(OLD,))
    assert upgrade(cluster, sim, Targets(None, GOOD_FIRMWARE)) == ROLLED_BACK
    worker, head = sim.nodes["halo2"], sim.nodes["halo1"]
    assert (worker.firmware, head.firmware) == (FIRMWARE, FIRMWARE)
    assert not {"install", "firmware", "reboot"} & set(head.scripts)


# a known-bad node repaired (issue 34 item 7)

BAD_KERNEL = "6.18.3-200.fc43"  # the list: kernels older than 6.18.4 are bad


def test_a_node_on_a_known_bad_kernel_is_upgraded_and_its_bad_kernel_removed(cluster) -> None:
    sim = FakeCluster.of(cluster)
    worker = sim.nodes["halo2"]
    worker.running, worker.kernels, worker.saved = BAD_KERNEL, [BAD_KERNEL], entry(BAD_KERNEL)
    assert upgrade(cluster, sim, Targets(NEW, None)) == OK
    assert (worker.running, worker.saved, worker.kernels) == (NEW, entry(NEW), [NEW])
    assert sim.nodes["halo1"].kernels == ["6.18.5-200.fc43", OLD, NEW]  # no bad one: kept
    removed = [line for line in sim.history if line["event"] == "os-removed"]
    assert removed == [{**removed[0], "node": "halo2", "removed": [f"kernel-core-{BAD_KERNEL}"]}]
    events = [(line["event"], line.get("node")) for line in sim.history]
    assert events.index(("os-promoted", "halo2")) < events.index(("os-removed", "halo2"))


def test_a_kernel_removed_only_after_its_node_passed_its_gate(cluster) -> None:
    sim = FakeCluster.of(cluster, broken=(NEW,))
    worker = sim.nodes["halo2"]
    worker.kernels = [BAD_KERNEL, OLD]
    assert upgrade(cluster, sim, Targets(NEW, None)) == ROLLED_BACK
    assert BAD_KERNEL in worker.kernels and "remove-bad" not in worker.scripts


def test_a_firmware_upgrade_removes_no_kernel(cluster) -> None:
    """Its deploy refuses a node with a known-bad kernel: no such node reaches P2."""
    sim = FakeCluster.of(cluster)
    sim.nodes["halo2"].kernels = [BAD_KERNEL, OLD]
    assert upgrade(cluster, sim, Targets(None, "20260110-1.fc43")) == OK
    assert "remove-bad" not in sim.nodes["halo2"].scripts


def test_a_run_again_on_a_node_already_upgraded_removes_its_bad_kernel(cluster) -> None:
    sim = FakeCluster.of(cluster)
    worker = sim.nodes["halo2"]
    worker.running, worker.kernels, worker.saved = NEW, [BAD_KERNEL, NEW], entry(NEW)
    assert upgrade(cluster, sim, Targets(NEW, None)) == OK
    assert reboots(sim) == ["halo1"] and worker.kernels == [NEW]


# a node left out (`--limit`, `--exclude`): refused without --partial, else the others stay


def test_a_node_left_out_without_partial_is_refused_in_one_line(
    cluster, tmp_path: Path, monkeypatch, capsys
) -> None:
    path = tmp_path / "cluster.yml"
    path.write_text(VALID_ROCE)
    monkeypatch.setenv("CLUSTER_CONFIG", str(path))
    assert osmain.main(["--os", "--kernel", NEW, "--exclude", "halo2"]) == REFUSED
    assert capsys.readouterr().err == (
        "halo-cluster upgrade --os: halo2 left out by --limit/--exclude: every node gets the new "
        "kernel unless --partial is given (then the nodes left out stay on their old kernel)\n"
    )
    assert osmain.partial_refusal(["halo2"], partial=True) is None
    assert osmain.partial_refusal([], partial=False) is None


def test_a_partial_upgrade_upgrades_only_the_chosen_nodes_and_names_the_others(
    cluster, capsys
) -> None:
    sim = FakeCluster.of(cluster)
    assert upgrade(cluster, sim, Targets(NEW, None), chosen=[cluster.head]) == OK
    assert reboots(sim) == ["halo1"]
    assert {name for name, _ in sim.calls} == {"halo1"}
    assert sim.deploys == [(kernels.deploy_data(Targets(NEW, None)), ["halo1"])]
    assert sim.nodes["halo2"].running == OLD
    assert capsys.readouterr().out.splitlines()[-2:] == [
        f"upgraded halo1 to kernel-core {NEW}",
        "halo2 stays on the old kernel and firmware (left out: --partial)",
    ]


class DownNodes(FakeCluster):
    """The fake cluster whose every node refuses SSH, as transport.py returns it."""

    def run(self, node, what: str, script: str, timeout: float = 0) -> Result:
        self.calls.append((node.name, what))
        refused = "ssh: connect to host 10.0.0.1 port 22: Connection refused"
        return Result(node, SSH_FAILED, "", refused, transport.why(refused))


def test_every_node_down_is_said_in_its_line_before_the_upgrade_stops(cluster, capsys) -> None:
    sim = DownNodes(nodes=FakeCluster.of(cluster).nodes)
    assert upgrade(cluster, sim, Targets(NEW, None)) == REFUSED
    lines = capsys.readouterr().err.splitlines()
    assert [line.split(" (")[0] for line in lines[:2]] == [
        f"{osupgrade.PROG}: {reach.said(node, 'x').split(' (')[0]}" for node in cluster.nodes
    ]
    assert all("refused" in line for line in lines[:2]), lines
    assert lines[2:] == [f"{osupgrade.PROG}: stopped before anything changed: halo1, halo2 (above)"]
    assert sim.deploys == [] and reboots(sim) == []

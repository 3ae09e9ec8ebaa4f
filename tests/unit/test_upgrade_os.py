"""`halo-cluster upgrade --os`'s phases (halo_cluster/tools/upgrading/osupgrade.py) on the fake
cluster's simulated nodes (tests/unit/helpers_upgrade.py: each step's script answered as GRUB,
kernel-install and dnf would, the one-time entry used up at the boot that reads it, saved_entry
otherwise), its gate on recorded outputs, and `--partial`."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from pyinfra_cli.util import parse_cli_arg

from halo_cluster.config.hostdata import host_data
from halo_cluster.node.versions import versions_process
from halo_cluster.tools import project
from halo_cluster.tools.upgrading import kernels, machine, osgate, osmain
from halo_cluster.tools.upgrading.kernels import Targets
from halo_cluster.tools.upgrading.machine import ABORTED, NOT_SERVING, OK, REFUSED, ROLLED_BACK
from halo_cluster.tools.upgrading.osgate import Observed
from halo_cluster.tools.upgrading.osupgrade import Upgrade
from tests.recorded import fixture, versions_output
from tests.unit.configs import VALID_ROCE
from tests.unit.helpers_upgrade import (
    FIRMWARE,
    INTERFACE,
    NEW,
    OLD,
    Answer,
    FakeCluster,
    SimNode,
    entry,
    observed_output,
)

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def cluster(tmp_path: Path):
    path = tmp_path / "cluster.yml"
    path.write_text(VALID_ROCE)
    return project.load(path)


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


# the gate on recorded outputs


def recorded_observed(rdma: str = "", cmdline: str | None = None, **link) -> Observed:
    text = observed_output(
        "6.18.7-200.fc43.x86_64",
        cmdline or fixture("proc-cmdline-fedora43.txt"),
        json.dumps([{"flags": ["UP", "LOWER_UP"], "mtu": 9000} | link]),
        rdma,
        "/dev/kfd",
        "20260110-1.fc43",
    )
    return osgate.observed(text, "enp23s0f1")


def test_the_gate_reads_the_kernel_arguments_from_proc_cmdline(cluster) -> None:
    after = recorded_observed()
    failed = osgate.gate_failure(cluster, "enp23s0f1", Targets(None, None), after, after)
    assert failed == (
        "kernel arguments not active: iommu=pt pci=realloc pcie_aspm=off "
        "amdgpu.gttsize=126976 ttm.pages_limit=32505856"
    )


def test_the_gate_fails_on_an_rdma_port_active_before_and_not_after(cluster) -> None:
    args = f"{fixture('proc-cmdline-fedora43.txt').strip()} {' '.join(cluster.kernel.args)}"
    recorded = fixture("rdma-link-irdma-legacy-names.txt")
    before = recorded_observed(recorded, args)
    after = recorded_observed(recorded.replace("state ACTIVE", "state DOWN"), args)
    targets = Targets("6.18.7-200.fc43", "20260110-1.fc43")
    assert before.rdma_active
    assert osgate.gate_failure(cluster, "enp23s0f1", targets, before, before) is None
    failed = osgate.gate_failure(cluster, "enp23s0f1", targets, before, after)
    assert failed == "no RDMA device is ACTIVE (one was before the reboot)"
    mtu = osgate.gate_failure(
        cluster, "enp23s0f1", targets, before, recorded_observed(recorded, args, mtu=1500)
    )
    assert mtu == "data link enp23s0f1 has MTU 1500, not 9000"


def test_the_boot_entry_id_is_the_file_name_without_conf() -> None:
    files = [f"{entry('6.18.5-200.fc43')}.conf", f"{entry(OLD)}.conf"]
    assert kernels.entry_id(files, f"{OLD}.x86_64") == entry(OLD)
    assert kernels.entry_id(files, f"{NEW}.x86_64") is None


# the lab's grub2-editenv stand-in keeps GRUB's block format


def editenv(path: Path, *args: str) -> str:
    tool = ROOT / "lab/rootfs/usr/local/sbin/grub2-editenv"
    return subprocess.run(
        [str(tool), str(path), *args], capture_output=True, text=True, check=True
    ).stdout


def test_the_lab_grubenv_is_grub_s_1024_byte_block(tmp_path: Path) -> None:
    env = tmp_path / "grubenv"
    editenv(env, "set", f"saved_entry={entry(OLD)}")
    editenv(env, "set", f"next_entry={entry(NEW)}")
    assert editenv(env, "list") == f"saved_entry={entry(OLD)}\nnext_entry={entry(NEW)}\n"
    editenv(env, "unset", "next_entry")
    data = env.read_bytes()
    assert len(data) == 1024 and data.startswith(b"# GRUB Environment Block\n")
    assert data.rstrip(b"#").endswith(f"saved_entry={entry(OLD)}\n".encode())


# the review of issue 27 (m25)


@pytest.mark.parametrize(
    ("argv", "line"),
    [
        (
            ["--firmware", "20251125-1.fc43.noarch"],
            "halo-cluster upgrade --os: --firmware: '20251125-1.fc43.noarch' ends in the arch "
            ".noarch (give it without the arch: 20260110-1.fc43)",
        ),
        (
            ["--kernel", "6.18.9-200.fc43.x86_64"],
            "halo-cluster upgrade --os: --kernel: '6.18.9-200.fc43.x86_64' ends in the arch "
            ".x86_64 (give it without the arch: 6.18.9-200.fc43)",
        ),
        (
            ["--kernel", "6.18.9"],
            "halo-cluster upgrade --os: --kernel: '6.18.9' is not [EPOCH:]VERSION-RELEASE of "
            "letters, digits and . _ + ~ ^ (give it as rpm prints it, without the arch: "
            "6.18.9-200.fc43)",
        ),
        ([], "halo-cluster upgrade --os: give --kernel VERSION, --firmware VERSION or both"),
    ],
)
def test_a_target_not_an_evr_without_arch_is_one_line_and_exit_1_before_any_read(
    argv: list[str], line: str, capsys, monkeypatch
) -> None:
    """A NEVRA's arch passed the known-bad list and installed that build on every node."""
    monkeypatch.setattr(project, "load", lambda _: pytest.fail("the config was read"))
    with pytest.raises(SystemExit) as stopped:
        osmain.main(["--os", *argv])
    assert stopped.value.code == REFUSED
    assert capsys.readouterr().err == f"{line}\n"


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


# the lab's boot loader chooses as GRUB's 00_header with GRUB_DEFAULT=saved


def choose(tmp_path: Path, kernels: list[str], **env: str) -> str:
    entries = tmp_path / "entries"
    entries.mkdir(exist_ok=True)
    for evr in kernels:
        (entries / f"{entry(evr)}.conf").write_text(f"version {evr}.x86_64\n")
    grubenv = tmp_path / "grubenv"
    for name, value in env.items():
        editenv(grubenv, "set", f"{name}={value}")
    tool = ROOT / "lab/rootfs/usr/local/libexec/lab-boot-choose"
    editor = str(ROOT / "lab/rootfs/usr/local/sbin/grub2-editenv")
    found = subprocess.run(
        [str(tool), str(entries), str(grubenv), editor], capture_output=True, text=True, check=True
    ).stdout.strip()
    return Path(found).name.removesuffix(".conf")


def test_the_lab_boots_next_entry_once_then_saved_entry(tmp_path: Path) -> None:
    kernels = ["6.18.5-200.fc43", OLD, NEW]
    assert choose(tmp_path, kernels, saved_entry=entry(OLD), next_entry=entry(NEW)) == entry(NEW)
    assert choose(tmp_path, kernels) == entry(OLD)  # next_entry used up


def test_a_next_entry_naming_no_entry_boots_entry_0_not_saved_entry(tmp_path: Path) -> None:
    """GRUB sets default to next_entry whatever it names; an unknown one is entry 0, the
    newest version in blscfg's order."""
    kernels = ["6.18.5-200.fc43", OLD, NEW]
    gone = entry("6.18.16-200.fc43")
    assert choose(tmp_path, kernels, saved_entry=entry(OLD), next_entry=gone) == entry(NEW)


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


GOOD_FIRMWARE = "20260110-1.fc43"


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


def test_the_firmware_install_rebuilds_the_initramfs_of_the_kernel_the_trial_boots() -> None:
    info = versions_process(
        versions_output(
            f"{OLD}.x86_64", [f"kernel-core-{OLD}.x86_64", f"amd-gpu-firmware-{FIRMWARE}.noarch"]
        )
    )
    script = kernels.firmware_script(info, Targets(NEW, GOOD_FIRMWARE), f"{NEW}.x86_64")
    assert f"install amd-gpu-firmware-{GOOD_FIRMWARE}\n" in script
    assert f"dracut -f --kver {NEW}.x86_64;" in script
    prepared = kernels.prepare_script(info, Targets(NEW, GOOD_FIRMWARE), entry(OLD))
    assert "firmware" not in prepared


# a known-bad node repaired (issue 34 item 7)

BAD_KERNEL = "6.18.3-200.fc43"  # the list: kernels older than 6.18.4 are bad


def test_the_deploy_gives_the_os_role_the_targets_as_host_data(cluster) -> None:
    """pyinfra reads `--data KEY=VALUE` as JSON: the os role's value the inventory sets."""
    argv = machine.deploy_argv(kernels.deploy_data(Targets(NEW, "20260110-1.fc43")))
    given = dict(argv[i + 1].split("=", 1) for i, word in enumerate(argv) if word == "--data")
    assert given["halo_reboot"] == "never"
    assert parse_cli_arg(given[kernels.UPGRADE_DATA]) == {
        "kernel-core": NEW,
        "amd-gpu-firmware": "20260110-1.fc43",
    }
    assert host_data(cluster, cluster.head)[kernels.UPGRADE_DATA] == {}
    firmware = machine.deploy_argv(kernels.deploy_data(Targets(None, "20260110-1.fc43")))
    assert f'{kernels.UPGRADE_DATA}={{"amd-gpu-firmware": "20260110-1.fc43"}}' in firmware


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

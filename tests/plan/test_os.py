"""The os role on recorded nodes: a known-bad kernel or firmware refuses the node before anything
changes, with the symptom and the fix (`halo-cluster upgrade --os`, then the exact dnf line); the
deploy of that upgrade admits the version it replaces, and only that package's; an unknown version
is reported, not refused; nodes that differ are warned about; `os.lock: true` locks the running
versions once."""

from __future__ import annotations

import logging

import pytest
from pyinfra_cli.util import parse_cli_arg

from halo_cluster.config import hostdata
from halo_cluster.node.versions import InstalledVersions
from halo_cluster.tools.upgrading.kernels import Targets, deploy_data
from halo_cluster.tools.upgrading.machine import deploy_argv
from tests.plan.harness import plan
from tests.plan.nodes import cluster, fresh_node, refusal
from tests.recorded import (
    fixture,
    recorded_fedora43_versions,
    strix_halo_versions,
    versions_output,
)

DNF5_LOCKS = "/etc/dnf/versionlock.toml"
DNF4_LOCKS = "/etc/dnf/plugins/versionlock.list"
RUNNING, PACKAGES = strix_halo_versions()
LOCKED = {
    "kernel": "6.18.5-200.fc43",
    "kernel-core": "6.18.5-200.fc43",
    "kernel-modules": "6.18.5-200.fc43",
    "kernel-modules-core": "6.18.5-200.fc43",
    "kernel-modules-extra": "6.18.5-200.fc43",
    "amd-gpu-firmware": "20260110-1.fc43",
    "linux-firmware": "20260110-1.fc43",
    "linux-firmware-whence": "20260110-1.fc43",
}


def with_firmware(version: str) -> list[str]:
    """The Strix Halo's versions with its recorded firmware set at another version."""
    return versions_output(RUNNING, [p.replace("20260110-1.fc43", version) for p in PACKAGES])


@pytest.fixture
def log(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    """The deploy's log lines, the preflight's INFO lines too."""
    caplog.set_level(logging.INFO, logger="pyinfra")
    return caplog


def plan_with(halo1: list[str], extra: str = "", **files) -> object:
    return plan(
        cluster(extra),
        {"halo1": fresh_node(versions=halo1, **files), "halo2": fresh_node()},
    )


def test_the_recorded_fedora43_kernels_are_refused_with_the_fix() -> None:
    """The recorded Fedora 43 host runs 6.17.8 with 6.17.1 installed: both below 6.18.4."""
    result = plan_with(versions_output(*recorded_fedora43_versions()))
    reason = refusal(result)
    assert "known-bad kernel-core 6.17.8-300.fc43 (running): kernels older than 6.18.4" in reason
    assert (
        "fix: `halo-cluster upgrade --os --kernel 6.18.9-200.fc43`, or by hand "
        "`dnf install kernel-6.18.9-200.fc43`, reboot into it, then "
    ) in reason
    assert "`dnf remove kernel-core-6.17.8-300.fc43`" in reason
    assert "6.17.1" not in reason, "an older known-bad kernel installed is no refusal"
    assert "source: kyuz0/amd-strix-halo-toolboxes README" in reason
    assert result.names("halo2"), "the other node runs on"


def fresh_fedora43(installed: str) -> list[str]:
    """A Fedora 43 Strix Halo on a good kernel (its recorded versions) that also has the recorded
    Fedora 43 host's kernel packages at `installed` (6.17.1: the install media's)."""
    _, recorded = recorded_fedora43_versions()
    kernels = [n for n in recorded if n.startswith("kernel") and "-6.17.1-" in n]
    more = [nevra.replace("6.17.1-300", installed) for nevra in kernels]
    return versions_output(RUNNING, PACKAGES + more)


def test_an_older_known_bad_kernel_left_installed_is_a_warn_with_the_fix(
    log: pytest.LogCaptureFixture,
) -> None:
    """A fresh Fedora 43 node keeps its install media's 6.17.1 after the upgrade to a good
    kernel: it boots only if picked in the menu, so the node is deployed, with the fix."""
    result = plan_with(fresh_fedora43("6.17.1-300"))
    assert result.refused == {}
    assert result.names("halo1"), "the node is deployed"
    assert (
        "preflight kernel: WARN (known-bad kernel-core 6.17.1-300.fc43 (installed, not running: "
        "older than 6.18.5-200.fc43): kernels older than 6.18.4"
    ) in log.text
    assert (
        "; fix: `dnf remove kernel-core-6.17.1-300.fc43`, or `halo-cluster upgrade --os "
        "--kernel 6.18.9-200.fc43`)"
    ) in log.text


def test_a_known_bad_kernel_newer_than_the_running_one_refuses_the_node() -> None:
    """Fedora boots the newest kernel next: a known-bad one installed above the running kernel
    (a user's entry calls 6.18.7 bad) is what the deploy's own reboot would run."""
    mine = (
        "os:\n  known_versions:\n    - {package: kernel-core, versions: ['6.18.7-200.fc43'], "
        "verdict: bad, symptom: hangs, source: our soak test, date: '2026-11-30'}\n"
    )
    reason = refusal(plan_with(fresh_fedora43("6.18.7-200"), mine))
    assert reason == (
        "known-bad kernel-core 6.18.7-200.fc43 (installed, newer than the running kernel: the "
        "next boot's): hangs (source: our soak test); fix: `dnf remove "
        "kernel-core-6.18.7-200.fc43`, or `halo-cluster upgrade --os --kernel 6.18.9-200.fc43`"
    )


def test_the_known_bad_firmware_is_refused_with_the_dnf_command() -> None:
    result = plan_with(with_firmware("20251125-1.fc43"))
    reason = refusal(result)
    assert "known-bad amd-gpu-firmware 20251125-1.fc43: MES firmware 0x83 on gfx1151" in reason
    assert (
        "fix: `halo-cluster upgrade --os --firmware 20260110-1.fc43`, or by hand "
        "`dnf upgrade amd-gpu-firmware-20260110-1.fc43 linux-firmware-20260110-1.fc43 "
        "linux-firmware-whence-20260110-1.fc43 && dracut -f --kver $(uname -r)`, then reboot"
    ) in reason
    assert "kyuz0/amd-strix-halo-toolboxes#37" in reason


def test_with_no_good_version_listed_the_fix_asks_for_one() -> None:
    mine = (
        "os:\n  known_versions:\n    - {package: amd-gpu-firmware, versions: ['> 2'], "
        "verdict: bad, symptom: every build hangs, source: our soak test, date: '2026-11-30'}\n"
    )
    reason = refusal(plan_with(with_firmware("20260110-1.fc43"), mine))
    assert reason.endswith(
        "fix: `halo-cluster upgrade --os --firmware VERSION` with a version the list does not "
        "call bad, or by hand install a amd-gpu-firmware version the list does not call bad"
    )


# the deploy `halo-cluster upgrade --os` runs in its P1: the targets reach the nodes as host data


def plan_upgrading(monkeypatch: pytest.MonkeyPatch, targets: Targets, halo1: list[str]) -> object:
    """The plan of the upgrade's own deploy: the host data its `--data` options set (as pyinfra
    parses them) over the inventory's."""
    argv = deploy_argv(deploy_data(targets))
    given = [argv[i + 1].split("=", 1) for i, word in enumerate(argv) if word == "--data"]
    override = {key: parse_cli_arg(value) for key, value in given}
    inventory = hostdata.host_data
    monkeypatch.setattr(hostdata, "host_data", lambda *args: inventory(*args) | override)
    return plan_with(halo1)


def test_the_upgrade_s_deploy_admits_the_known_bad_firmware_it_replaces(
    monkeypatch: pytest.MonkeyPatch, log: pytest.LogCaptureFixture
) -> None:
    result = plan_upgrading(
        monkeypatch, Targets(None, "20260110-1.fc43"), with_firmware("20251125-1.fc43")
    )
    assert result.refused == {}
    assert result.names("halo1"), "the node is deployed"
    assert (
        "preflight amdgpu firmware: WARN (known-bad amd-gpu-firmware 20251125-1.fc43, admitted: "
        "this deploy is `halo-cluster upgrade --os --firmware 20260110-1.fc43`'s, which "
        "installs it on the node in its turn and gates it)"
    ) in log.text


def test_a_firmware_upgrade_admits_no_known_bad_kernel(monkeypatch: pytest.MonkeyPatch) -> None:
    fedora = versions_output(*recorded_fedora43_versions())
    reason = refusal(plan_upgrading(monkeypatch, Targets(None, "20260110-1.fc43"), fedora))
    assert "known-bad kernel-core 6.17.8-300.fc43 (running)" in reason


def test_a_kernel_upgrade_admits_the_known_bad_kernels_it_replaces(
    monkeypatch: pytest.MonkeyPatch, log: pytest.LogCaptureFixture
) -> None:
    fedora = versions_output(*recorded_fedora43_versions())
    result = plan_upgrading(monkeypatch, Targets("6.18.9-200.fc43", None), fedora)
    assert result.refused == {}
    command = "this deploy is `halo-cluster upgrade --os --kernel 6.18.9-200.fc43`'s, which"
    assert (
        f"preflight kernel: WARN (known-bad kernel-core 6.17.8-300.fc43 (running), admitted: "
        f"{command} then boots the node into it once, gates and keeps it)"
    ) in log.text
    assert (
        f"preflight kernel: WARN (known-bad kernel-core 6.17.1-300.fc43 (installed), admitted: "
        f"{command} removes it once the node passed its gate)"
    ) in log.text


def test_a_known_bad_target_admits_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """The upgrade refuses such a target before any node is read; host data naming one (a
    deploy run by hand with `--data`) is judged again here."""
    bad = with_firmware("20251125-1.fc43")
    reason = refusal(plan_upgrading(monkeypatch, Targets(None, "20251125-1.fc43"), bad))
    assert "known-bad amd-gpu-firmware 20251125-1.fc43: MES firmware 0x83" in reason


@pytest.mark.parametrize(
    "target",
    ["\u0661:6.18.9-200.fc43", "6.18.9-200.fc43.x86_64", "6." + "1" * 5000 + "-1", "6.18.9"],
)
def test_a_target_outside_rpm_s_grammar_admits_nothing(
    monkeypatch: pytest.MonkeyPatch, target: str
) -> None:
    """`--kernel` refuses such a value before the config is read; host data naming one (an
    Arabic-Indic epoch, an arch, 5,000 characters) admits no known-bad kernel: the list judges
    rpm's versions only, and this one is none."""
    fedora = versions_output(*recorded_fedora43_versions())
    reason = refusal(plan_upgrading(monkeypatch, Targets(target, None), fedora))
    assert "known-bad kernel-core 6.17.8-300.fc43 (running)" in reason
    assert "admitted" not in reason


def test_a_good_kernel_and_firmware_pass_and_nothing_is_locked_by_default(
    log: pytest.LogCaptureFixture,
) -> None:
    result = plan_with(versions_output(RUNNING, PACKAGES))
    assert result.refused == {}
    assert "preflight kernel: OK (running 6.18.5-200.fc43, known good" in log.text
    assert "preflight amdgpu firmware: OK (amd-gpu-firmware 20260110-1.fc43" in log.text
    assert not any("versionlock" in c for c in result.commands("halo1"))


def test_a_version_the_list_does_not_know_is_reported_not_refused(
    log: pytest.LogCaptureFixture,
) -> None:
    result = plan_with(with_firmware("20260916-1.fc43"))
    assert result.refused == {}
    assert (
        "preflight amdgpu firmware: NOT VERIFIED (20260916-1.fc43: not in the known-versions list)"
        in log.text
    )


def test_nodes_that_differ_are_warned_about(log: pytest.LogCaptureFixture) -> None:
    result = plan_with(with_firmware("20251111-1.fc43"))
    assert result.refused == {}
    assert (
        "preflight same versions: WARN (kernel 6.18.5-200.fc43.x86_64, amd-gpu-firmware "
        "20251111-1.fc43; halo2 runs 6.18.5-200.fc43.x86_64 with 20260110-1.fc43"
    ) in log.text


def test_your_entry_decides_a_version(log: pytest.LogCaptureFixture) -> None:
    mine = (
        "os:\n  known_versions:\n    - {package: amd-gpu-firmware, versions: [20251125-1.fc43], "
        "verdict: good, source: our soak test, date: '2026-11-30'}\n"
    )
    result = plan_with(with_firmware("20251125-1.fc43"), mine)
    assert result.refused == {}
    assert "preflight amdgpu firmware: OK (amd-gpu-firmware 20251125-1.fc43, known good" in (
        log.text
    )


def test_a_node_on_a_kernel_no_package_installed_is_not_judged(
    log: pytest.LogCaptureFixture,
) -> None:
    """A lab node: it runs its host's kernel (here the recorded Ubuntu one), and has neither
    kernel-core nor amd-gpu-firmware installed."""
    dmesg = fixture("dmesg-amdgpu-strix-halo-ubuntu2510-gttsize-deprecated.txt")
    host_kernel = next(w for w in dmesg.split() if w.endswith("-generic"))
    result = plan_with(versions_output(host_kernel, [], dnf5=False))
    assert result.refused == {}
    assert f"preflight kernel: NOT VERIFIED (running {host_kernel}, no installed kernel-core's" in (
        log.text
    )
    assert "preflight amdgpu firmware: NOT VERIFIED (amd-gpu-firmware is not installed" in (
        log.text
    )


def lock_commands(result) -> list[str]:
    return [c for c in result.commands("halo1") if "versionlock" in c]


def test_os_lock_locks_the_running_versions_with_full_specs() -> None:
    result = plan_with(versions_output(RUNNING, PACKAGES), "os: {lock: true}\n")
    assert lock_commands(result) == [
        "dnf versionlock add " + " ".join(f"{n}-{e}" for n, e in LOCKED.items())
    ]
    assert any(
        f"Kernel and firmware versions | Lock the kernel and firmware versions in {DNF5_LOCKS}"
        in name
        for name in result.names("halo1")
    )


def dnf5_file(locks: dict[str, str]) -> str:
    """versionlock.toml as dnf5 writes it (the recorded files' format)."""
    recorded = fixture("dnf5-versionlock-epoch-ci-dnf-stack.toml")
    header, entry = recorded.split("[[packages]]\n")
    return header + "".join(
        "[[packages]]\n" + entry.replace("wget", name).replace("0:1.19.5-5.fc29", evr)
        for name, evr in locks.items()
    )


def test_a_locked_node_plans_nothing_and_a_lock_removed_by_hand_is_restored(
    log: pytest.LogCaptureFixture,
) -> None:
    locked = {DNF5_LOCKS: dnf5_file(LOCKED)}
    result = plan_with(versions_output(RUNNING, PACKAGES), "os: {lock: true}\n", files=locked)
    assert lock_commands(result) == []
    removed = dict(LOCKED)
    del removed["kernel-core"]
    files = {DNF5_LOCKS: dnf5_file(removed)}
    result = plan_with(versions_output(RUNNING, PACKAGES), "os: {lock: true}\n", files=files)
    assert lock_commands(result) == ["dnf versionlock add kernel-core-6.18.5-200.fc43"]
    assert (
        "Kernel and firmware versions | Restore version locks removed by hand from "
        f"{DNF5_LOCKS}: kernel-core 6.18.5-200.fc43"
    ) in result.names("halo1")
    assert "version locks removed by hand: kernel-core 6.18.5-200.fc43: restored" in log.text


def test_dnf4_keeps_its_locks_in_the_plugins_list() -> None:
    """The lab's dnf 4: its versionlock plugin's list, in the recorded line form."""
    recorded = fixture("dnf4-versionlock-list-ci-dnf-stack.txt").splitlines()[0]
    lines = [
        recorded.replace("wget", name).replace("1.19.5-5.fc29", evr) for name, evr in LOCKED.items()
    ]
    result = plan_with(
        versions_output(RUNNING, PACKAGES, dnf5=False),
        "os: {lock: true}\n",
        files={DNF4_LOCKS: "\n".join(lines) + "\n"},
    )
    assert lock_commands(result) == []
    result = plan_with(versions_output(RUNNING, PACKAGES, dnf5=False), "os: {lock: true}\n")
    assert any(DNF4_LOCKS in name for name in result.names("halo1"))


def test_the_versions_are_read_in_the_nodes_one_command() -> None:
    result = plan_with(versions_output(RUNNING, PACKAGES))
    assert not any("uname -r" in c for c in result.read["halo1"][1:]), result.read["halo1"]
    assert any("uname -r" in c for c in result.read["halo1"][:1])
    assert InstalledVersions().command().startswith('echo "running $(uname -r)"')

"""Kernel and firmware on the lab (issue 27, design steps 7 and 8): the stand-in RPMs as dnf
installs them, a known-bad firmware refused with its fix, locks that hold against `dnf upgrade`
and show in drift when removed by hand, and `halo-cluster upgrade --os`: a good kernel kept on
both nodes, a broken one stopped at the first worker, which boots its old kernel again, and a node
on the known-bad firmware repaired by it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from lab import cli, node
from tests.e2e.conftest import ROOT, Lab, failure
from tests.e2e.serving_lab import SERVE, wait_serving

HALO_CLUSTER = str(Path(sys.executable).parent / "halo-cluster")
OLD, GOOD, BROKEN = "6.18.6-200.fc43", "6.18.9-200.fc43", "6.18.16-200.fc43"
FIRMWARE, BAD_FIRMWARE, GOOD_FIRMWARE = "20251111-1.fc43", "20251125-1.fc43", "20260110-1.fc43"
FIRMWARE_SET = ("amd-gpu-firmware", "linux-firmware", "linux-firmware-whence")
GRUBENV = "grub2-editenv - list"
LOCKED = "os:\n  lock: true\n"


def run(argv: list[str], config: Path, timeout: float = 1200) -> subprocess.CompletedProcess:
    env = dict(os.environ, CLUSTER_CONFIG=str(config))
    return subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)


def rpm(lab: Lab, name: str, package: str) -> list[str]:
    return lab.ssh(name, f"rpm -q --qf '%{{EVR}}\\n' {package}").split()


def boots(name: str) -> int:
    return node.NodeDirs(cli.LAB_DIR / "nodes" / name).boots()


def test_a_node_starts_on_the_stand_in_kernel_and_firmware(converged: Lab) -> None:
    lab = converged
    for name in lab.nodes:
        assert rpm(lab, name, "kernel-core") == ["6.18.5-200.fc43", OLD]
        assert lab.ssh(name, "uname -r").strip() == f"{OLD}.x86_64"
        for package in FIRMWARE_SET:
            assert rpm(lab, name, package) == [FIRMWARE], package
        assert f"saved_entry={cli.rootfs.MACHINE_ID}-{OLD}.x86_64" in lab.ssh(name, GRUBENV)


def test_known_bad_firmware_is_refused_and_locks_hold(converged: Lab) -> None:
    lab = converged
    bad = " ".join(f"{p}-{BAD_FIRMWARE}" for p in FIRMWARE_SET)
    lab.ssh("node2", f"dnf -y -q install {bad}")
    result = lab.deploy(config=lab.config("reboot: if-needed\n"))
    out = result.stdout + result.stderr
    assert result.returncode == 1, out[-3000:]
    assert "[node2] refused: " in out and "[node1] refused" not in out
    assert "known-bad amd-gpu-firmware 20251125-1.fc43: MES firmware 0x83" in out
    fix = " ".join(f"{p}-20260110-1.fc43" for p in FIRMWARE_SET)
    assert f"dnf upgrade {fix} && dracut -f --kver $(uname -r)" in out
    # the fix as printed (the lab has no dracut, nor initramfs to rebuild)
    lab.ssh("node2", f"dnf -y -q upgrade {fix}")
    try:
        locked = lab.config(f"reboot: if-needed\n{LOCKED}")
        result = lab.deploy(config=locked)
        assert result.returncode == 0, failure(result)
        kernels = {name: rpm(lab, name, "kernel-core") for name in lab.nodes}
        firmware = {name: rpm(lab, name, "amd-gpu-firmware") for name in lab.nodes}
        for name in lab.nodes:
            lab.ssh(name, "dnf -y -q upgrade")  # the repository offers 6.18.16 and 20260110
            assert rpm(lab, name, "kernel-core") == kernels[name]
            assert rpm(lab, name, "amd-gpu-firmware") == firmware[name]
        lab.ssh("node1", "dnf -y -q versionlock delete kernel-core")
        drift = run([HALO_CLUSTER, "drift", "--json-out", os.devnull], locked, 300)
        assert drift.returncode == 2, drift.stdout + drift.stderr[-2000:]
        assert f"kernel-core {OLD}" in drift.stdout + drift.stderr
        assert "removed by hand" in drift.stdout + drift.stderr
        result = lab.deploy(config=locked)
        assert result.returncode == 0, failure(result)
        assert "kernel-core" in lab.ssh("node1", "dnf -q versionlock list")
    finally:
        for name in lab.nodes:
            lab.ssh(name, "dnf -y -q versionlock clear", check=False)
        lab.ssh("node2", f"dnf -y -q downgrade {' '.join(f'{p}-{FIRMWARE}' for p in FIRMWARE_SET)}")


@pytest.mark.kernels  # after every other test of the shared 2-node lab
def test_a_broken_kernel_stops_at_the_first_worker() -> None:
    lab = Lab(2, "roce").ensure_converged()
    lab.lab("break-kernel", BROKEN)  # the form, as rpm prints it
    try:
        broken_kernel_stops(lab)
    finally:  # the lab as before for the good kernel's test: no broken kernel, no lock
        for name in lab.nodes:
            lab.ssh(name, f"rm -f {cli.BROKEN_KERNELS}; dnf -y -q versionlock clear", False)
            remove = f"! rpm -q kernel-core-{BROKEN} || dnf -y -q remove kernel-core-{BROKEN}"
            lab.ssh(name, remove, check=False)


def broken_kernel_stops(lab: Lab) -> None:
    head_boots, head_env = boots("node1"), lab.ssh("node1", GRUBENV)
    result = run(
        [HALO_CLUSTER, "upgrade", "--os", "--kernel", BROKEN], lab.config("reboot: if-needed\n")
    )
    assert result.returncode == 6, result.stdout + result.stderr[-3000:]
    assert result.stderr.strip().endswith(
        f"node2: gate failed after booting {BROKEN}: data link enp1s0f0np0 is DOWN; back on {OLD}"
    )
    assert lab.ssh("node2", "uname -r").strip() == f"{OLD}.x86_64"
    assert f"saved_entry={cli.rootfs.MACHINE_ID}-{OLD}.x86_64" in lab.ssh("node2", GRUBENV)
    assert boots("node1") == head_boots  # the head never rebooted
    assert lab.ssh("node1", GRUBENV) == head_env  # nor its default moved
    assert lab.ssh("node1", "uname -r").strip() == f"{OLD}.x86_64"


@pytest.mark.kernels  # after the broken kernel, on the same lab, before it serves
def test_a_node_on_known_bad_firmware_is_repaired_by_upgrade_os() -> None:
    """The refusal's first fix: the upgrade's own deploy admits the firmware it replaces. The
    lab does not serve here (the good kernel's test below gates with serving)."""
    lab = Lab(2, "roce").ensure_converged()
    config = lab.config("reboot: if-needed\n")
    lab.ssh("node2", f"dnf -y -q install {' '.join(f'{p}-{BAD_FIRMWARE}' for p in FIRMWARE_SET)}")
    try:
        result = lab.deploy(config=config)
        out = result.stdout + result.stderr
        assert result.returncode == 1, out[-3000:]
        assert "[node2] refused: " in out and "[node1] refused" not in out
        command = [HALO_CLUSTER, "upgrade", "--os", "--firmware", GOOD_FIRMWARE]
        assert f"fix: `halo-cluster {' '.join(command[1:])}`, or by hand `dnf upgrade " in out
        result = run(command, config)
        assert result.returncode == 0, result.stdout + result.stderr[-3000:]
        for name in lab.nodes:
            for package in FIRMWARE_SET:
                assert rpm(lab, name, package) == [GOOD_FIRMWARE], (name, package)
        drift = run([HALO_CLUSTER, "drift", "--json-out", os.devnull], config, 300)
        assert drift.returncode == 0, drift.stdout + drift.stderr[-3000:]
    finally:  # the firmware the lab starts with, for the good kernel's test
        back = " ".join(f"{p}-{FIRMWARE}" for p in FIRMWARE_SET)
        for name in lab.nodes:
            lab.ssh(name, f"rpm -q {back} >/dev/null || dnf -y -q downgrade {back}")


@pytest.mark.kernels  # after the broken kernel, on the same lab
def test_upgrade_to_a_good_kernel_passes_on_both_nodes() -> None:
    lab = Lab(2, "roce").ensure_converged(SERVE + LOCKED)
    wait_serving(lab)
    config = lab.config(f"reboot: if-needed\n{SERVE}{LOCKED}")
    history = "cat ~vllm/.local/state/halo-cluster/history.jsonl 2>/dev/null || true"
    # the firmware repair before it upgraded these nodes too: only this run's lines count
    earlier = len(lab.ssh("node1", history).splitlines())
    result = run([HALO_CLUSTER, "upgrade", "--os", "--kernel", GOOD], config)
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    for name in lab.nodes:
        assert lab.ssh(name, "uname -r").strip() == f"{GOOD}.x86_64"
        env = lab.ssh(name, GRUBENV)
        assert f"saved_entry={cli.rootfs.MACHINE_ID}-{GOOD}.x86_64" in env
        assert "next_entry=\n" in env or "next_entry" not in env
        locks = lab.ssh(name, "dnf -q versionlock list")
        assert f"kernel-core-0:{GOOD}" in locks and f"kernel-core-0:{OLD}" not in locks
    wait_serving(lab)
    lines = lab.ssh("node1", history).splitlines()[earlier:]
    events = [json.loads(line) for line in lines if '"event":"os-' in line]
    assert [e["node"] for e in events if e["event"] == "os-promoted"] == ["node2", "node1"]
    assert (events[-1]["event"], events[-1]["result"]) == ("os-ended", 0)

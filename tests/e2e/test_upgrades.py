"""Drift detection, re-provisioning after a kernel upgrade or a replaced config file, interrupted
and partial runs: on the lab."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

from halo_cluster.config import state
from halo_cluster.config.lock import LOCK_FILE
from lab import cli
from tests.e2e.conftest import PYINFRA, ROOT, Lab, changed_hosts

# the lab's kernels are 6.18: no amdgpu.gttsize there (deprecated from 6.15)
SEED_ARGS = "iommu=pt pci=realloc pcie_aspm=off ttm.pages_limit=32505856"
NEW_KERNEL = "6.18.9-200.fc43.x86_64"
KEYFILE = "/etc/NetworkManager/system-connections/halo-data.nmconnection"


def drift(config=None) -> tuple[int, dict, str]:
    out = ROOT / "reports" / "drift-test.json"
    env = dict(os.environ, CLUSTER_CONFIG=str(config or cli.CONFIG))
    result = subprocess.run(
        [sys.executable, "-m", "halo_cluster.tools.drift", "--json-out", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    return result.returncode, json.loads(out.read_text()), result.stdout


@pytest.fixture
def lab(converged: Lab) -> Lab:
    return converged


def test_drift_exit_codes(lab: Lab, tmp_path) -> None:
    code, summary, out = drift()
    assert code == 0, out
    assert {n: e["status"] for n, e in summary["nodes"].items()} == {
        "node1": "converged",
        "node2": "converged",
    }
    assert "drift: none" in out
    assert "| node1 | converged |" in (ROOT / "reports" / "drift-test.md").read_text()
    bad = tmp_path / "bad.yml"
    bad.write_text("cluster_user: vllm\nmut: 1\nnodes: []\n")
    code, summary, out = drift(bad)
    assert code == 1 and "mut: unknown key" in out
    unreachable = tmp_path / "unreachable.yml"
    unreachable.write_text(
        cli.CONFIG.read_text()
        .replace("10.99.2.2", "10.99.9.2")
        .replace("ssh/", f"{cli.LAB_DIR}/ssh/")
    )
    # with the lab's lock, as the config's own folder has it: without one the head's history is
    # adopted only while its last resolve is of this reference (test_first_user's is not)
    lock, copy = (state.folder(folder) / LOCK_FILE for folder in (cli.LAB_DIR, tmp_path))
    if copy != lock:  # the same file when $HALO_STATE names one folder for both
        copy.parent.mkdir(exist_ok=True)
        shutil.copy(lock, copy)
    code, summary, out = drift(unreachable)
    assert code == 1 and summary["errors"], out
    assert summary["nodes"]["node2"]["status"] == "unreachable", out
    assert summary["nodes"]["node1"]["status"] == "converged", out


def test_drift_on_a_refused_node_exits_1_with_the_reason(lab: Lab, tmp_path) -> None:
    refused = tmp_path / "refused.yml"
    refused.write_text(
        cli.CONFIG.read_text()
        .replace("data: {interface: enp1s0f0np0}", "data: {interface: mgmt0}", 1)
        .replace("ssh/", f"{cli.LAB_DIR}/ssh/")
    )
    code, summary, out = drift(refused)
    assert code == 1, out
    assert summary["nodes"]["node1"]["status"] == "refused"
    assert "mgmt0 carries the SSH session (10.99.1.2)" in summary["nodes"]["node1"]["reason"]
    assert summary["nodes"]["node1"]["changes"] == []
    assert summary["nodes"]["node2"]["status"] == "converged"
    assert "node1: refused: mgmt0 carries the SSH session" in out
    assert "Safety checks" not in out


def test_kernel_upgrade_is_reported_and_restored(lab: Lab) -> None:
    try:
        # a kernel install that took stale options, then a reboot into it
        stale = "root=UUID=7138d111-30d8-4fe0-af64-0d8cf3b01c3c ro rootflags=subvol=root rhgb quiet"
        lab.lab(
            "install-kernel", "node2", "--version", NEW_KERNEL, "--options", f"{stale} iommu=pt"
        )
        lab.lab("reboot", "node2")
        entry = f"/boot/loader/entries/5e0d1c3b2a4f48e6b7c8d9e0f1a2b3c4-{NEW_KERNEL}.conf"

        code, summary, out = drift()
        assert code == 2, out
        pending = {n: e for n, e in summary["nodes"].items() if e["status"] == "drift"}
        assert list(pending) == ["node2"]
        assert pending["node2"]["changes"] == [f"Kernel arguments | Kernel arguments in {entry}"]
        diff = "\n".join(pending["node2"]["files"][entry])
        assert f"+options {stale} iommu=pt pci=realloc pcie_aspm=off" in diff

        result = lab.deploy("--json", config=lab.config("reboot: if-needed\n"))
        assert result.returncode == 0, result.stderr[-3000:]
        changed = changed_hosts(json.loads(result.stdout))
        assert changed == {
            f"Kernel arguments | Kernel arguments in {entry}": ["node2"],
            "Reboot | Reboot worker for kernel arguments": ["node2"],
            "Reboot | Confirm the kernel arguments are active": ["node2"],
        }
        running = lab.ssh("node2", "cat /proc/cmdline")
        assert running.startswith(f"BOOT_IMAGE=(hd0,gpt2)/vmlinuz-{NEW_KERNEL} ")
        assert set(SEED_ARGS.split()) <= set(running.split())
        assert drift()[0] == 0
    finally:  # `uname -r` follows the boot: the next tests' nodes run one kernel again
        lab.boot_packaged_kernel("node2")


def test_dnf_update_that_replaces_a_managed_file(lab: Lab) -> None:
    # as if a package update installed its own /etc/default/grub over ours
    lab.ssh(
        "node1",
        "sed -i 's/^GRUB_CMDLINE_LINUX=.*/GRUB_CMDLINE_LINUX=\"rhgb quiet\"/' /etc/default/grub",
    )
    code, summary, out = drift()
    assert code == 2 and summary["nodes"]["node2"]["status"] == "converged", out
    operations = summary["nodes"]["node1"]["changes"]
    assert "Kernel arguments | Kernel arguments in /etc/default/grub" in operations
    assert lab.deploy().returncode == 0
    assert drift()[0] == 0


def test_interrupted_run_leaves_no_half_written_file_and_converges() -> None:
    lab = Lab(2, "roce").fresh()
    env = dict(os.environ, CLUSTER_CONFIG=str(cli.CONFIG))
    process = subprocess.Popen(
        [PYINFRA, "-y", "inventory.py", "deploy.py"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    for line in process.stdout:
        if "Starting operation: Data link" in line:
            os.killpg(process.pid, signal.SIGKILL)
            break
    process.wait(timeout=60)
    time.sleep(0.5)
    for name in lab.nodes:
        listing = lab.ssh(name, "ls -A /etc/NetworkManager/system-connections/").split()
        # NetworkManager ignores the hidden temporary file an upload may leave
        assert set(listing) <= {"halo-data.nmconnection", ".halo-data.nmconnection.halo-new"}
        # every file we manage is either as it was or complete: the boot entries parse
        assert "options " in lab.ssh(name, "cat /boot/loader/entries/*6.18.6*.conf")
    first = lab.deploy_json()
    assert first["results"]["failed_hosts"] == []
    assert changed_hosts(lab.deploy_json()) == {}
    assert "halo-data:enp1s0f0np0" in lab.ssh("node1", "nmcli -t -f NAME,DEVICE c show --active")


def test_unreachable_node_is_reported_and_the_others_converge() -> None:
    lab = Lab(2, "roce").fresh()
    subprocess.run(["ip", "link", "set", "hl-node2", "down"], check=True)
    try:
        result = lab.deploy()
    finally:
        subprocess.run(["ip", "link", "set", "hl-node2", "up"], check=True)
    assert result.returncode != 0
    assert "[node2] SSH error" in result.stdout + result.stderr
    assert "iommu=pt" in lab.ssh("node1", "grep ^GRUB_CMDLINE_LINUX= /etc/default/grub")
    assert "iommu=pt" not in lab.ssh("node2", "grep ^GRUB_CMDLINE_LINUX= /etc/default/grub")
    again = lab.deploy_json()
    changed = changed_hosts(again)
    assert changed["Kernel arguments | Kernel arguments in /etc/default/grub"] == ["node2"]
    # the head's key reaches the worker that was away
    assert changed["Launcher | vllm on node1 may log in as vllm"] == ["node2"]
    assert changed_hosts(lab.deploy_json()) == {}

"""The lab itself: nodes boot, answer over SSH, pass jumbo frames, reboot into their boot entry."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from pathlib import Path

import pytest

from lab import cli, network, node, rootfs
from tests.e2e.conftest import Lab
from tests.e2e.waits import until

DEFAULT_ENTRY = "/boot/loader/entries/5e0d1c3b2a4f48e6b7c8d9e0f1a2b3c4-6.18.6-200.fc43.x86_64.conf"


@pytest.fixture
def lab() -> Lab:
    return Lab(2, "roce").ensure_up()


@pytest.fixture
def fresh_lab() -> Lab:
    """Nodes as the lab makes them, never deployed to."""
    return Lab(2, "roce").fresh()


def test_nodes_boot_to_running_with_fedora_identity(lab: Lab) -> None:
    for name in lab.nodes:
        out = lab.ssh(
            name,
            "systemctl is-system-running; hostname; . /etc/os-release; "
            "echo $NAME $VERSION_ID; ps -o comm= -p 1",
        )
        assert out.split("\n")[:4] == ["running", name, "Fedora Linux 43", "systemd"]


def test_network_manager_manages_the_data_link_only(lab: Lab) -> None:
    devices = dict(
        line.split(":", 1)
        for line in lab.ssh("node1", "nmcli -t -f DEVICE,STATE device").splitlines()
    )
    assert devices["mgmt0"] == "unmanaged"
    assert devices["enp1s0f0np0"] != "unmanaged"


def test_dnf_sees_only_the_lab_repository(fresh_lab: Lab) -> None:
    lab = fresh_lab
    repos = lab.ssh("node1", "dnf -q repolist --enabled").splitlines()[1:]
    assert [line.split()[0] for line in repos] == ["halo-lab"]
    info = lab.ssh("node1", "dnf -q info --available perftest")
    assert "Lab stand-in" in info


def test_cluster_user_and_podman(lab: Lab) -> None:
    assert lab.ssh("node1", "id -u vllm").strip() == "1000"
    assert lab.ssh("node1", "podman --version").startswith("podman version 5")
    # quadlet: a .container unit becomes a service
    lab.ssh(
        "node1",
        "mkdir -p /etc/containers/systemd && printf '[Container]\\nImage=x\\n' > "
        "/etc/containers/systemd/probe.container && systemctl daemon-reload",
    )
    assert "probe.service" in lab.ssh("node1", "systemctl list-unit-files probe.service")


def test_data_link_passes_jumbo_frames(lab: Lab) -> None:
    for index, name in enumerate(lab.nodes, start=1):
        lab.ssh(
            name,
            f"ip link set enp1s0f0np0 mtu 9000 up && "
            f"ip addr replace 192.168.100.{index}/30 dev enp1s0f0np0",
        )
    assert " 0% packet loss" in lab.ssh("node1", "ping -c 2 -W 2 -M do -s 8972 192.168.100.2")
    too_big = lab.ssh("node1", "ping -c 1 -W 2 -M do -s 8973 192.168.100.2 2>&1", check=False)
    assert "message too long" in too_big.lower()


def test_reboot_shows_the_default_entry_options(fresh_lab: Lab) -> None:
    lab = fresh_lab
    lab.ssh("node1", f"sed -i 's/^options .*/& lab.probe=1/' {DEFAULT_ENTRY}")
    assert "lab.probe=1" not in lab.ssh("node1", "cat /proc/cmdline")
    boots = node.NodeDirs(cli.LAB_DIR / "nodes" / "node1").boots()
    lab.lab("reboot", "node1")
    assert "lab.probe=1" in lab.ssh("node1", "cat /proc/cmdline").split()
    assert node.NodeDirs(cli.LAB_DIR / "nodes" / "node1").boots() == boots + 1
    # the data link came back as after a power cycle: no address, MTU 1500
    assert lab.ssh("node1", "cat /sys/class/net/enp1s0f0np0/mtu").strip() == "1500"


def test_install_kernel_adds_a_default_entry_from_proc_cmdline(lab: Lab) -> None:
    try:
        lab.lab("install-kernel", "node2", "--version", "6.18.9-200.fc43.x86_64")
        entry = lab.ssh("node2", "cat /boot/loader/entries/*6.18.9-200.fc43.x86_64.conf")
        running = lab.ssh("node2", "cat /proc/cmdline").split()
        assert f"options {' '.join(running[1:])}" in entry
        lab.lab("reboot", "node2")
        assert lab.ssh("node2", "cat /proc/cmdline").startswith(
            "BOOT_IMAGE=(hd0,gpt2)/vmlinuz-6.18.9-200.fc43.x86_64 "
        )
    finally:  # `uname -r` follows the boot: the next tests' nodes run one kernel again
        lab.boot_packaged_kernel("node2")


def test_lab_up_twice_changes_nothing(lab: Lab) -> None:
    boots = node.NodeDirs(cli.LAB_DIR / "nodes" / "node2").boots()
    result = lab.lab("up", "--nodes", "2", "--link", "roce")
    assert "already up" in result.stdout
    assert node.NodeDirs(cli.LAB_DIR / "nodes" / "node2").boots() == boots


def test_lab_up_after_its_processes_were_killed(lab: Lab) -> None:
    # what happens between a session and its CI run: processes die, namespaces and mounts stay
    for name in lab.nodes:
        for group in node.cgroup_dirs(name):
            for pid in node.cgroup_pids(group):
                with contextlib.suppress(ProcessLookupError):  # it ended since it was listed
                    os.kill(pid, signal.SIGKILL)
    result = lab.lab("up", "--nodes", "2", "--link", "roce")
    assert "nodes up" in result.stdout
    assert lab.ssh("node1", "systemctl is-system-running").strip() == "running"


def test_thunderbolt_lab_of_three_is_refused() -> None:
    result = Lab(3, "thunderbolt").lab("up", "--nodes", "3", "--link", "thunderbolt", check=False)
    assert result.returncode != 0
    assert "point to point" in result.stderr + result.stdout


def test_three_nodes_meet_on_a_switch_with_jumbo_frames() -> None:
    lab = Lab(3, "roce").fresh()
    for index, name in enumerate(lab.nodes, start=1):
        lab.ssh(
            name,
            f"ip link set enp1s0f0np0 mtu 9000 up && "
            f"ip addr replace 192.168.100.{index}/29 dev enp1s0f0np0",
        )
    for peer in ("192.168.100.2", "192.168.100.3"):
        assert " 0% packet loss" in lab.ssh("node1", f"ping -c 2 -W 2 -M do -s 8972 {peer}")


def test_lab_down_leaves_nothing_behind() -> None:
    lab = Lab(2, "roce")
    lab.lab("up", "--nodes", "2", "--link", "roce")
    lab.ssh("node1", "true")  # one connection per node, shared by the commands after it
    shared = cli.MUX_DIR / f"root@{cli.node_address(cli.load_state(), 'node1')}"
    assert shared.is_socket()
    result = lab.lab("down")
    assert "removed" in result.stdout
    assert not shared.exists() and list((cli.LAB_DIR / "nodes").iterdir()) == []
    # the nodes' folders, deleted in the background: about 3 s for a converged node's 1 GB
    until(lambda: not list(cli.LAB_DIR.glob("removing-*")), 60, "the nodes' folders deleted")
    assert network.lab_namespaces() == []
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    assert f" {network.HOST_VETH_PREFIX}" not in links
    assert node.lab_cgroups() == []
    assert cli.lab_mounts() == []
    processes = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    assert "systemd-nspawn" not in processes and "lab.supervisor" not in processes
    assert f"ssh: {cli.MUX_DIR}" not in processes  # no shared connection outlives its lab
    assert "nothing was up" in lab.lab("down").stdout


def test_lab_down_unmounts_a_root_left_by_another_checkout(tmp_path: Path) -> None:
    # a session's lab in its own folder, whose processes died: CI's clone must still clean it
    Lab(2, "roce").lab("up", "--nodes", "2", "--link", "roce")
    lower = next(p for p in rootfs.CACHE.glob("rootfs-*") if (p / ".complete").exists())
    for sub in ("upper", "work", "merged"):
        (tmp_path / sub).mkdir()
    subprocess.run(
        [
            "mount",
            "-t",
            "overlay",
            "overlay",
            "-o",
            f"lowerdir={lower},upperdir={tmp_path}/upper,workdir={tmp_path}/work",
            str(tmp_path / "merged"),
        ],
        check=True,
    )
    assert str(tmp_path / "merged") in cli.lab_mounts()
    Lab(2, "roce").lab("down")
    assert cli.lab_mounts() == []

"""`pyinfra inventory.py deploy.py` against fresh lab nodes, for both interconnects."""

from __future__ import annotations

import pytest

from lab import cli, node
from tests.e2e.conftest import Lab, changed_hosts

SEED_ARGS = "iommu=pt pci=realloc pcie_aspm=off amdgpu.gttsize=126976 ttm.pages_limit=32505856"
KEYFILE = "/etc/NetworkManager/system-connections/halo-data.nmconnection"
DATA = {"roce": ("enp1s0f0np0", "192.168.100"), "thunderbolt": ("thunderbolt0", "192.168.2")}


@pytest.fixture(scope="module", params=["roce", "thunderbolt"])
def lab(request: pytest.FixtureRequest) -> Lab:
    lab = Lab(2, request.param).fresh()
    # a user's own arguments, and an old GTT size the deploy must replace
    lab.ssh(
        "node1",
        "sed -i 's/^GRUB_CMDLINE_LINUX=\"/&mitigations=off amdgpu.gttsize=65536 /' "
        "/etc/default/grub",
    )
    return lab


def test_dry_run_shows_diffs_and_changes_nothing(lab: Lab) -> None:
    before = lab.ssh("node1", "md5sum /etc/default/grub /boot/loader/entries/*")
    result = lab.deploy("--dry", "--diff")
    assert result.returncode == 0, result.stderr[-2000:]
    out = result.stdout + result.stderr
    assert "Will modify /etc/default/grub" in out
    assert '+GRUB_CMDLINE_LINUX="mitigations=off amdgpu.gttsize=126976 rhgb quiet' in out
    assert "Will modify /boot/loader/entries/" in out
    assert f"Will create {KEYFILE}" in out
    assert lab.ssh("node1", "md5sum /etc/default/grub /boot/loader/entries/*") == before
    assert lab.ssh("node1", f"test -e {KEYFILE} || echo absent").strip() == "absent"


def test_first_run_converges(lab: Lab) -> None:
    result = lab.deploy_json()
    changed = changed_hosts(result)
    assert result["results"]["failed_hosts"] == []
    assert changed["Kernel arguments | Kernel arguments in /etc/default/grub"] == ["node1", "node2"]
    assert any(name.startswith("Data link | Activate") for name in changed)


def test_second_run_changes_nothing(lab: Lab) -> None:
    result = lab.deploy_json()
    assert changed_hosts(result) == {}
    assert result["results"]["totals"]["success"] == 0


def test_kernel_arguments_in_all_three_places_foreign_ones_kept(lab: Lab) -> None:
    grub = lab.ssh("node1", "grep ^GRUB_CMDLINE_LINUX= /etc/default/grub").strip()
    assert (
        grub == 'GRUB_CMDLINE_LINUX="mitigations=off amdgpu.gttsize=126976 rhgb quiet '
        'iommu=pt pci=realloc pcie_aspm=off ttm.pages_limit=32505856"'
    )
    for name in lab.nodes:
        for line in lab.ssh(name, "grep -h ^options /boot/loader/entries/*.conf").splitlines():
            assert line.endswith(f"rhgb quiet {SEED_ARGS}"), line
        assert lab.ssh(name, "cat /etc/kernel/cmdline").strip().endswith(SEED_ARGS)
    assert "grub_class fedora" in lab.ssh("node1", "cat /boot/loader/entries/*6.18.6*.conf")


def test_reboot_required_until_the_node_reboots(lab: Lab) -> None:
    result = lab.deploy()
    assert "reboot required: kernel arguments not active: iommu=pt" in result.stderr
    assert "iommu=pt" not in lab.ssh("node2", "cat /proc/cmdline")
    lab.lab("reboot", "node2")
    running = lab.ssh("node2", "cat /proc/cmdline").split()
    assert set(SEED_ARGS.split()) <= set(running)
    assert "[node2] reboot required" not in lab.deploy().stderr


def test_data_link_profile_and_jumbo_frames(lab: Lab) -> None:
    interface, prefix = DATA[lab.link]
    # node2 rebooted above: NetworkManager brought the profile back on its own
    for index, name in enumerate(lab.nodes, start=1):
        assert lab.ssh(name, f"stat -c '%a %U' {KEYFILE}").strip() == "600 root"
        active = lab.ssh(name, "nmcli -t -f NAME,DEVICE connection show --active")
        assert f"halo-data:{interface}" in active.splitlines()
        assert lab.ssh(name, f"cat /sys/class/net/{interface}/mtu").strip() == "9000"
        assert f"{prefix}.{index}/30" in lab.ssh(name, f"ip -br addr show {interface}")
    assert " 0% packet loss" in lab.ssh("node1", f"ping -c 2 -W 2 -M do -s 8972 {prefix}.2")
    too_big = lab.ssh("node1", f"ping -c 1 -W 2 -M do -s 8973 {prefix}.2 2>&1", check=False)
    assert "message too long" in too_big.lower()


def test_other_profiles_untouched(lab: Lab) -> None:
    lab.ssh(
        "node1",
        "nmcli connection add type ethernet ifname dummy9 con-name user-profile "
        "autoconnect no >/dev/null",
    )
    lab.deploy_json()
    assert "user-profile" in lab.ssh("node1", "nmcli -t -f NAME connection show").split()


def test_thunderbolt_module_listed(lab: Lab) -> None:
    listed = lab.ssh("node1", "cat /etc/modules-load.d/thunderbolt-net.conf 2>/dev/null || true")
    assert ("thunderbolt_net" in listed.split()) == (lab.link == "thunderbolt")


def test_refuses_the_management_interface() -> None:
    lab = Lab(2, "roce").fresh()
    config = (
        lab.config("")
        .read_text()
        .replace("data: {interface: enp1s0f0np0}", "data: {interface: mgmt0}", 1)
    )
    path = cli.LAB_DIR / "cluster-mgmt.yml"
    path.write_text(config)
    before = lab.ssh("node1", "md5sum /etc/default/grub")
    result = lab.deploy(config=path.resolve())
    assert result.returncode != 0
    assert "refused: mgmt0 carries the SSH session (10.99.1.2)" in result.stderr
    assert lab.ssh("node1", "md5sum /etc/default/grub") == before
    # the other node still converges
    assert "iommu=pt" in lab.ssh("node2", "grep ^GRUB_CMDLINE_LINUX= /etc/default/grub")


def test_reboot_if_needed_reboots_workers_first_and_confirms() -> None:
    lab = Lab(2, "roce").fresh()
    result = lab.deploy("--json", config=lab.config("reboot: if-needed\n"))
    assert result.returncode == 0, result.stderr[-3000:]
    boots = {name: node.NodeDirs(cli.LAB_DIR / "nodes" / name) for name in lab.nodes}
    assert all(dirs.boots() == 2 for dirs in boots.values())
    # node2 (worker) booted before node1 (head)
    assert boots["node2"].boots_file.stat().st_mtime < boots["node1"].boots_file.stat().st_mtime
    for name in lab.nodes:
        assert set(SEED_ARGS.split()) <= set(lab.ssh(name, "cat /proc/cmdline").split())
    again = lab.deploy("--json", config=lab.config("reboot: if-needed\n"))
    assert "Reboot" not in again.stdout

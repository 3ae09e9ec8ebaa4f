"""`pyinfra inventory.py deploy.py` against fresh lab nodes, for both interconnects."""

from __future__ import annotations

import pytest

from lab import cli, node
from tests.e2e.conftest import Lab, changed_hosts, summary, verify

# the lab's kernels are 6.18: amdgpu.gttsize is deprecated there, ttm.pages_limit alone sizes GTT
SEED_ARGS = "iommu=pt pci=realloc pcie_aspm=off ttm.pages_limit=32505856"
KEYFILE = "/etc/NetworkManager/system-connections/halo-data.nmconnection"
DATA = {"roce": ("enp1s0f0np0", "192.168.100"), "thunderbolt": ("thunderbolt0", "192.168.2")}


USER_ARGS = "mitigations=off amdgpu.gttsize=65536"


def fresh_with_user_args(link: str) -> Lab:
    lab = Lab(2, link).fresh()
    # a user's own arguments, and an old GTT size the deploy must take away (6.18 kernels)
    lab.ssh(
        "node1",
        f"sed -i 's/^GRUB_CMDLINE_LINUX=\"/&{USER_ARGS} /' /etc/default/grub",
    )
    return lab


@pytest.fixture(scope="module", params=["roce", "thunderbolt"])
def link(request: pytest.FixtureRequest) -> str:
    """Module scope: pytest runs every test of one interconnect before the other's."""
    return request.param


@pytest.fixture
def fresh(link: str) -> Lab:
    """New nodes with the user's own arguments on node1, not deployed yet."""
    return fresh_with_user_args(link)


@pytest.fixture
def deployed(link: str) -> Lab:
    """Nodes with the user's own arguments, deployed (`reboot: never`), whatever ran before."""
    lab = Lab(2, link).ensure_up()
    if "mitigations=off" not in lab.ssh("node1", "cat /etc/default/grub"):
        lab = fresh_with_user_args(link)
    result = lab.deploy()
    assert result.returncode == 0, result.stderr[-3000:]
    return lab


def test_dry_run_shows_diffs_and_changes_nothing(fresh: Lab) -> None:
    lab = fresh
    before = lab.ssh("node1", "md5sum /etc/default/grub /boot/loader/entries/*")
    result = lab.deploy("--dry", "--diff")
    assert result.returncode == 0, result.stderr[-2000:]
    out = result.stdout + result.stderr
    assert "Will modify /etc/default/grub" in out
    assert '+GRUB_CMDLINE_LINUX="mitigations=off rhgb quiet' in out
    assert "Will modify /boot/loader/entries/" in out
    assert f"Will create {KEYFILE}" in out
    assert lab.ssh("node1", "md5sum /etc/default/grub /boot/loader/entries/*") == before
    assert lab.ssh("node1", f"test -e {KEYFILE} || echo absent").strip() == "absent"


def test_first_run_converges(fresh: Lab) -> None:
    lab = fresh
    result = lab.deploy_json()
    changed = changed_hosts(result)
    assert result["results"]["failed_hosts"] == []
    assert changed["Kernel arguments | Kernel arguments in /etc/default/grub"] == ["node1", "node2"]
    assert any(name.startswith("Data link | Activate") for name in changed)


def test_second_run_changes_nothing(deployed: Lab) -> None:
    lab = deployed
    result = lab.deploy_json()
    assert changed_hosts(result) == {}
    assert result["results"]["totals"]["success"] == 0


def test_kernel_arguments_in_all_three_places_foreign_ones_kept(deployed: Lab) -> None:
    lab = deployed
    grub = lab.ssh("node1", "grep ^GRUB_CMDLINE_LINUX= /etc/default/grub").strip()
    assert (
        grub == 'GRUB_CMDLINE_LINUX="mitigations=off rhgb quiet '
        'iommu=pt pci=realloc pcie_aspm=off ttm.pages_limit=32505856"'
    )
    for name in lab.nodes:
        for line in lab.ssh(name, "grep -h ^options /boot/loader/entries/*.conf").splitlines():
            assert line.endswith(f"rhgb quiet {SEED_ARGS}"), line
        assert lab.ssh(name, "cat /etc/kernel/cmdline").strip().endswith(SEED_ARGS)
    assert "grub_class fedora" in lab.ssh("node1", "cat /boot/loader/entries/*6.18.6*.conf")


def test_reboot_required_until_the_node_reboots(link: str) -> None:
    # deployed nodes not rebooted since: those an earlier test of this link left, else fresh ones
    lab = Lab(2, link).ensure_up()
    if "iommu=pt" in lab.ssh("node2", "cat /proc/cmdline"):
        lab = fresh_with_user_args(link)
    assert lab.deploy().returncode == 0
    result = lab.deploy()
    assert "reboot required: kernel arguments not active: iommu=pt" in result.stderr
    assert "iommu=pt" not in lab.ssh("node2", "cat /proc/cmdline")
    lab.lab("reboot", "node2")
    running = lab.ssh("node2", "cat /proc/cmdline").split()
    assert set(SEED_ARGS.split()) <= set(running)
    assert "[node2] reboot required" not in lab.deploy().stderr


def test_data_link_profile_and_jumbo_frames(deployed: Lab) -> None:
    lab = deployed
    interface, prefix = DATA[lab.link]
    for index, name in enumerate(lab.nodes, start=1):
        assert lab.ssh(name, f"stat -c '%a %U' {KEYFILE}").strip() == "600 root"
        active = lab.ssh(name, "nmcli -t -f NAME,DEVICE connection show --active")
        assert f"halo-data:{interface}" in active.splitlines()
        assert lab.ssh(name, f"cat /sys/class/net/{interface}/mtu").strip() == "9000"
        assert f"{prefix}.{index}/30" in lab.ssh(name, f"ip -br addr show {interface}")
    assert " 0% packet loss" in lab.ssh("node1", f"ping -c 2 -W 2 -M do -s 8972 {prefix}.2")
    too_big = lab.ssh("node1", f"ping -c 1 -W 2 -M do -s 8973 {prefix}.2 2>&1", check=False)
    assert "message too long" in too_big.lower()


def test_other_profiles_untouched(deployed: Lab) -> None:
    lab = deployed
    lab.ssh(
        "node1",
        "nmcli connection add type ethernet ifname dummy9 con-name user-profile "
        "autoconnect no >/dev/null",
    )
    lab.deploy_json()
    assert "user-profile" in lab.ssh("node1", "nmcli -t -f NAME connection show").split()


def test_thunderbolt_module_listed(deployed: Lab) -> None:
    lab = deployed
    listed = lab.ssh("node1", "cat /etc/modules-load.d/thunderbolt-net.conf 2>/dev/null || true")
    assert ("thunderbolt_net" in listed.split()) == (lab.link == "thunderbolt")


def test_thunderbolt_lab_passes_verify_with_link_speed_not_verified(link: str) -> None:
    if link != "thunderbolt":
        pytest.skip("roce: tests/e2e/test_verify.py verifies the roce lab")
    # after the thunderbolt tests above: the same nodes, made active by a reboot
    lab = Lab(2, link).ensure_converged()
    result = verify()
    assert result.returncode == 0, result.stdout[-4000:]
    rows = summary(result)
    for name in lab.nodes:
        assert rows[(name, "thunderbolt_link_speed")] == "NOT VERIFIED"
        assert rows[(name, "rdma_link_active")] == "skipped"
        assert rows[(name, "data_link_profile")] == "passed"
        assert rows[(name, "data_link_in_the_trusted_zone")] == "passed"
    assert rows[("node1->node2", "full_size_frames")] == "passed"


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

"""`make verify` against the lab: passes what the lab supports, shows hardware as NOT VERIFIED,
and fails with a clear message for a node broken on purpose (the thunderbolt lab is verified in
test_deploy.py, on the nodes its thunderbolt tests left)."""

from __future__ import annotations

import pytest

from tests.e2e.conftest import ROOT, Lab, summary, verify


@pytest.fixture
def lab(converged: Lab) -> Lab:
    return converged


def test_converged_lab_passes_with_hardware_not_verified(lab: Lab) -> None:
    result = verify()
    assert result.returncode == 0, result.stdout[-4000:]
    rows = summary(result)
    for node in lab.nodes:
        for check in (
            "packages_installed",
            "kernel_arguments_active",
            "data_link_profile",
            "toolbox_present_with_expected_options",
            "inside_the_toolbox",
        ):
            assert rows[(node, check)] == "passed", (node, check)
        for check in (
            "rdma_link_active",
            "ibv_port_active",
            "roce_v2_gid",
            "memlock_unlimited_in_the_containers",
        ):
            assert rows[(node, check)] == "NOT VERIFIED", (node, check)
    assert rows[("node2", "rdma_latency")] == "NOT VERIFIED"
    assert rows[("node1->node2", "full_size_frames")] == "passed"
    assert "NOT VERIFIED (hardware this machine cannot have)" in result.stdout
    junit = (ROOT / "reports" / "verify-lab.xml").read_text()
    assert junit.count("<testcase") == len(rows)
    assert 'message="NOT VERIFIED: RDMA device: systemd-nspawn container' in junit


def test_a_node_left_out_is_neither_read_nor_judged(lab: Lab) -> None:
    """One node in maintenance (issue 35, item 6): node2's data link broken, `--exclude node2`
    checks node1 alone and passes; the checks that need node2 (its pairs) are not run."""
    lab.ssh("node2", "ip link set enp1s0f0np0 mtu 1500")
    result = verify("--exclude", "node2")
    assert result.returncode == 0, result.stdout[-4000:]
    rows = summary(result)
    assert rows[("node1", "data_link_profile")] == "passed"
    assert not [where for where, _ in rows if "node2" in where], rows
    assert lab.deploy().returncode == 0  # node2's link back


def test_broken_node_fails_with_clear_messages(lab: Lab) -> None:
    lab.ssh("node2", "ip link set enp1s0f0np0 mtu 1500")
    lab.ssh("node1", "sed -i 's/ pcie_aspm=off//' /boot/loader/entries/*6.18.5*.conf")
    lab.ssh("node1", "rpm -e perftest")
    result = verify()
    assert result.returncode != 0
    out = result.stdout
    assert "node2: MTU 1500 on enp1s0f0np0, expected 9000: re-run the deploy" in out
    assert "pcie_aspm=off 0 times in /boot/loader/entries/" in out
    assert "node1: not installed: perftest: re-run the deploy" in out
    rows = summary(result)
    assert rows[("node2", "data_link_profile")] == "FAILED"
    assert rows[("node1", "packages_installed")] == "FAILED"
    assert rows[("node1->node2", "full_size_frames")] == "FAILED"
    # the deploy repairs all three
    assert lab.deploy().returncode == 0
    assert verify().returncode == 0

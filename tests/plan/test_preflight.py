"""Preflight decisions from the Hardware fact, fed with outputs recorded on real hosts."""

from __future__ import annotations

from halo_cluster.decide import preflight
from halo_cluster.node.facts import Hardware
from tests.plan.nodes import E810, strix_halo_hardware
from tests.recorded import fixture

INTERFACES = {E810["name"]: E810}


def checks(lines: list[str], interconnect: str = "roce") -> dict[str, preflight.Check]:
    hw = Hardware().process(lines)
    found = preflight.run(hw, interconnect, E810["name"], INTERFACES, 124)
    return {check.name: check for check in found}


def test_strix_halo_with_e810() -> None:
    found = checks(strix_halo_hardware())
    assert found["CPU"].status == "OK"
    assert "AMD RYZEN AI MAX+ 395 w/ Radeon 8060S" in found["CPU"].detail
    assert found["E810"].status == "OK"
    assert found["E810 firmware"].status == "OK"
    assert "4.91 0x800214b5 1.3909.0" in found["E810 firmware"].detail
    assert found["RDMA device"].line() == "RDMA device: OK (enp194s0np0 -> irdma1)"
    # 4 GiB reported at the 512 MB BIOS minimum (recorded): a hint, never a failure
    assert found["iGPU carve-out"].status == "WARN"
    assert "4096 MiB" in found["iGPU carve-out"].detail


def test_large_carve_out_names_the_bios_setting() -> None:
    text = fixture("sysfs-mem_info_vram_total-strix-halo-bios96g-annotated.txt")
    size = text.splitlines()[1].split()[0]
    lines = [line for line in strix_halo_hardware() if not line.startswith("vram")]
    found = checks([*lines, f"vram {size}"])
    assert found["iGPU carve-out"].status == "WARN"
    assert "98304 MiB" in found["iGPU carve-out"].detail
    assert "BIOS iGPU memory allocation" in found["iGPU carve-out"].detail


def test_old_firmware_is_a_warning() -> None:
    old = fixture("ethtool-i-e810-rhel9-inkernel-truncated-version.txt").splitlines()
    lines = [line for line in strix_halo_hardware() if not line.startswith("ethtool")]
    found = checks([*lines, *[f"ethtool {line}" for line in old]])
    assert found["E810 firmware"].status == "WARN"
    assert "4.40" in found["E810 firmware"].detail


def test_missing_rdma_device_fails_on_real_hardware() -> None:
    lines = [line for line in strix_halo_hardware() if not line.startswith("rdma")]
    assert checks(lines)["RDMA device"].status == "FAIL"


def test_wrong_driver_fails() -> None:
    hw = Hardware().process(strix_halo_hardware())
    ports = {E810["name"]: dict(E810, driver="vfio-pci")}
    found = {c.name: c for c in preflight.run(hw, "roce", E810["name"], ports, 124)}
    assert found["E810"].line() == "E810: FAIL (enp194s0np0 is bound to vfio-pci, not ice)"


def test_container_reads_not_verified_never_ok() -> None:
    lab = ["virt systemd-nspawn", "cpu  Intel(R) Xeon(R) CPU"]
    veth = {"enp1s0f0np0": {"vendor": None, "device": None, "driver": None}}
    for interconnect in ("roce", "thunderbolt"):
        hw = Hardware().process(lab)
        found = preflight.run(hw, interconnect, "enp1s0f0np0", veth, 124)
        assert {c.status for c in found} == {"NOT VERIFIED"}, found
        assert all("systemd-nspawn container" in c.detail for c in found)


def test_thunderbolt_link_speed() -> None:
    text = fixture("thunderbolt-sysfs-rx_speed-rx_lanes-usb4-device.txt").splitlines()
    speed = text[text.index("# cat /sys/bus/thunderbolt/devices/0-1/rx_speed") + 1]
    lanes = text[text.index("# cat /sys/bus/thunderbolt/devices/0-1/rx_lanes") + 1]
    base = [line for line in strix_halo_hardware() if line.split()[0] in ("virt", "cpu")]
    # the recorded values as the link's own XDomain (0-1) reports them for thunderbolt0
    good = checks([*base, f"tb thunderbolt0 0-1 {speed.replace(' ', '')} {lanes}"], "thunderbolt")
    assert good["Thunderbolt link"].line() == (
        "Thunderbolt link: OK (thunderbolt0 to the peer (XDomain 0-1): 20 Gb/s x 2 lanes)"
    )
    slow = checks([*base, "tb thunderbolt0 0-1 10.0Gb/s 2"], "thunderbolt")
    assert slow["Thunderbolt link"].status == "WARN"
    assert "E810" not in good
    none = checks(base, "thunderbolt")["Thunderbolt link"]
    assert none.status == "WARN" and "thunderbolt-net drives no interface" in none.detail


def test_memory_check_fails_where_the_gtt_leaves_the_os_too_little() -> None:
    # MemTotal values as /proc/meminfo reports them, in kB
    small = 64 * 1024**2
    large = 125 * 1024**2
    assert preflight.memory(small, 124, False, "").status == preflight.FAIL
    assert "lower kernel.gtt_gib" in preflight.memory(small, 124, False, "").detail
    assert preflight.memory(small, 56, False, "").status == preflight.OK
    assert preflight.memory(large, 124, False, "").status == preflight.OK
    hidden = preflight.memory(small, 124, True, "systemd-nspawn container")
    assert hidden.status == preflight.NOT_VERIFIED

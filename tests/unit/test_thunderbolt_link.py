"""The host-to-host Thunderbolt link itself, not the fastest device nor the name thunderbolt0:
the Hardware fact's command really run over a sysfs tree laid out as the kernel lays it out
(NOT VERIFIED against a recording: none of a host-to-host link's sysfs was found; the layout is
drivers/thunderbolt/xdomain.c's, the values and names are recorded ones), the preflight and
verify decision on it, and the data interface it resolves to.

Recorded: the thunderbolt0 interface of a Framework Desktop (ip a: its MAC; lshw: driver
thunderbolt-net) and a USB4 device's rx_speed/rx_lanes (`20.0 Gb/s`, `2`), the value format."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from halo_cluster.decide import preflight
from halo_cluster.decide.safety import THUNDERBOLT_NET, resolve_interface
from halo_cluster.node.thunderbolt import thunderbolt_links, thunderbolt_links_command
from tests.recorded import fixture

# where an XDomain hangs: the host router's domain (a Strix Halo's USB4 router; the PCI path is
# an example)
DOMAIN = "devices/pci0000:00/0000:00:08.3/0000:c7:00.5/domain0/0-0"


def recorded_usb4(name: str) -> str:
    text = fixture("thunderbolt-sysfs-rx_speed-rx_lanes-usb4-device.txt").splitlines()
    return text[text.index(f"# cat /sys/bus/thunderbolt/devices/0-1/{name}") + 1]


def recorded_thunderbolt0() -> dict:
    ip = fixture("ip-a-thunderbolt0-framework-desktop-fedora44.txt")
    mac = re.search(r"link/ether (\S+)", ip)
    driver = re.search(
        r"driver=(\S+)", fixture("lshw-network-thunderbolt0-framework-desktop-fedora44.txt")
    )
    assert mac and driver
    return {
        "mac": mac[1],
        "mtu": 1500,
        "addresses": [],
        "vendor": None,
        "device": None,
        "driver": driver[1],
    }


def sysfs(root: Path, links: dict[str, tuple[str, str, str]], devices: dict[str, str]) -> Path:
    """A /sys with `links` ({interface: (XDomain, rx_speed, rx_lanes)}: thunderbolt-net's
    interface on the XDomain's service `XDOMAIN.0`) and other Thunderbolt `devices` ({name:
    rx_speed}: a dock), as the kernel links them."""
    driver = root / "bus/thunderbolt/drivers" / THUNDERBOLT_NET
    driver.mkdir(parents=True)
    (root / "class/net").mkdir(parents=True)
    for interface, (xdomain, speed, lanes) in links.items():
        peer = root / DOMAIN / xdomain
        service = peer / f"{xdomain}.0"
        (service / "net" / interface).mkdir(parents=True)
        (peer / "rx_speed").write_text(f"{speed}\n")
        (peer / "rx_lanes").write_text(f"{lanes}\n")
        (service / "driver").symlink_to(driver)
        (service / "net" / interface / "device").symlink_to(f"../../../{xdomain}.0")
        (root / "class/net" / interface).symlink_to(service / "net" / interface)
    for name, speed in devices.items():
        (root / DOMAIN / name).mkdir(parents=True)
        (root / DOMAIN / name / "rx_speed").write_text(f"{speed}\n")
    (root / "devices/virtual/net/lo").mkdir(parents=True)
    (root / "class/net/lo").symlink_to(root / "devices/virtual/net/lo")
    return root


def read(root: Path) -> list[tuple[str, str, str, str]]:
    done = subprocess.run(
        ["/bin/sh", "-c", thunderbolt_links_command(str(root))],
        capture_output=True,
        text=True,
        timeout=10,
        check=True,
    )
    return thunderbolt_links(done.stdout.splitlines())


def test_a_dock_faster_than_the_link_does_not_hide_it(tmp_path: Path) -> None:
    dock = {"0-3": recorded_usb4("rx_speed")}  # 20.0 Gb/s: a device, no host
    root = sysfs(tmp_path, {"thunderbolt1": ("0-1", "10.0 Gb/s", "1")}, dock)
    links = read(root)
    assert links == [("thunderbolt1", "0-1", "10.0Gb/s", "1")]
    check = preflight.thunderbolt(links, "thunderbolt1", False, "")
    assert check.status == preflight.WARN
    assert check.detail.startswith("thunderbolt1 to the peer (XDomain 0-1): 10 Gb/s x 1 lanes")


def test_the_recorded_speed_on_the_link_itself_is_ok(tmp_path: Path) -> None:
    link = ("0-1", recorded_usb4("rx_speed"), recorded_usb4("rx_lanes"))
    links = read(sysfs(tmp_path, {"thunderbolt0": link}, {}))
    check = preflight.thunderbolt(links, "thunderbolt0", False, "")
    assert check.line() == (
        "Thunderbolt link: OK (thunderbolt0 to the peer (XDomain 0-1): 20 Gb/s x 2 lanes)"
    )


def test_a_kernel_without_the_xdomain_speed_is_a_warning(tmp_path: Path) -> None:
    root = sysfs(tmp_path, {"thunderbolt0": ("0-1", "x", "2")}, {})
    (root / DOMAIN / "0-1/rx_speed").unlink()
    links = read(root)
    assert links == [("thunderbolt0", "0-1", "-", "2")]
    assert "reports no speed" in preflight.thunderbolt(links, "thunderbolt0", False, "").detail


def test_no_link_but_a_dock_is_no_link(tmp_path: Path) -> None:
    links = read(sysfs(tmp_path, {}, {"0-1": recorded_usb4("rx_speed")}))
    check = preflight.thunderbolt(links, "thunderbolt0", False, "")
    assert links == [] and check.status == preflight.WARN
    assert "no host-to-host link on thunderbolt0" in check.detail


def test_thunderbolt0_configured_is_the_link_by_its_other_name() -> None:
    link = recorded_thunderbolt0()
    assert link["driver"] == THUNDERBOLT_NET
    lo = {"mac": "00:00:00:00:00:00", "vendor": None, "device": None, "driver": None}
    interfaces = {"lo": lo, "thunderbolt1": link}
    assert resolve_interface(interfaces, "thunderbolt0", None) == ("thunderbolt1", None)
    # two links: which one is not guessed
    both = {**interfaces, "thunderbolt2": dict(link, mac="02:00:00:00:00:02")}
    name, problem = resolve_interface(both, "thunderbolt0", None)
    assert name is None and problem and problem.startswith("interface thunderbolt0 not found")


def test_the_labs_veth_named_thunderbolt0_stays_as_named() -> None:
    veth = {"mac": "02:00:00:00:00:01", "vendor": None, "device": None, "driver": None}
    assert resolve_interface({"thunderbolt0": veth}, "thunderbolt0", None) == ("thunderbolt0", None)

"""Preflight: is this the hardware the guide assumes? Pure decisions from the Hardware fact and
the node's MemTotal (the NodeMemory fact).

Each check is OK, WARN, FAIL or NOT VERIFIED. Where the hardware cannot be seen (a container such
as a lab node) a check reads NOT VERIFIED, never OK. Preflight reports; it does not stop the deploy,
except for a check that `refuses` (a role's, such as the os role's known-bad kernel or firmware):
deploy.py refuses that node before anything on it changes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from halo_cluster.config.rules import OS_RESERVE_GIB
from halo_cluster.config.serving import OBJECT_STORE_SHARE
from halo_cluster.decide.safety import E810_DEVICES, INTEL_VENDOR

OK, WARN, FAIL, NOT_VERIFIED = "OK", "WARN", "FAIL", "NOT VERIFIED"
MIN_E810_FIRMWARE = (4, 91)  # field-notes.md: E810 firmware >= 4.91 recommended
CARVE_OUT_MINIMUM = 512 * 1024**2
# One Strix Halo at the 512 MB BIOS minimum reports 4 GiB (field-notes.md): up to this, only a hint.
CARVE_OUT_REPORTED_AT_MINIMUM = 4 * 1024**3
BIOS_SETTING = "set the BIOS iGPU memory allocation (UMA frame buffer size) to its minimum, 512 MB"


@dataclass(frozen=True)
class Check:
    name: str
    status: str
    detail: str
    refuses: bool = False  # the node must not be deployed (deploy.py refuses it with `detail`)

    def line(self) -> str:
        return f"{self.name}: {self.status} ({self.detail})"


def run(
    hw: dict,
    interconnect: str,
    interface: str | None,
    interfaces: dict,
    gtt_bytes: int,
    object_store_mib: int | None = None,
    memtotal_kib: int = 0,
) -> list[Check]:
    """The checks of a node from its Hardware fact (`hw`) and its MemTotal (NodeMemory's)."""
    hidden = hw.get("virt", "none") not in ("none", "")
    why_hidden = f"{hw.get('virt')} container: the hardware is not visible"
    checks = [
        cpu(hw, hidden, why_hidden),
        carve_out(hw, hidden, why_hidden),
        memory(memtotal_kib, gtt_bytes // 1024**3, hidden, why_hidden),
    ]
    if object_store_mib:
        checks.append(object_store(memtotal_kib, object_store_mib, hidden, why_hidden))
    if interconnect == "roce":
        port = interfaces.get(interface or "", {})
        checks += [
            e810(port, interface, hidden, why_hidden),
            firmware(hw.get("ethtool", {}), interface, hidden, why_hidden),
            rdma_device(hw.get("rdma", []), interface, hidden, why_hidden),
        ]
    else:
        checks.append(thunderbolt(hw.get("thunderbolt", []), interface, hidden, why_hidden))
    return checks


def cpu(hw: dict, hidden: bool, why: str) -> Check:
    model = hw.get("cpu", "")
    if "RYZEN AI MAX" in model.upper():
        return Check("CPU", OK, f"{model}: Strix Halo")
    if hidden:
        return Check("CPU", NOT_VERIFIED, why)
    return Check(
        "CPU",
        WARN,
        f"{model or 'unknown'} is not a Strix Halo (Ryzen AI MAX); the "
        "kernel arguments are tuned for its 128 GB unified memory",
    )


def memory(memtotal_kib: int, gtt_gib: int, hidden: bool, why: str) -> Check:
    """The GTT must leave the OS its reserve of the node's own memory (MemTotal excludes the
    carve-out, so it is compared with the machine size the GTT was chosen for)."""
    if hidden:
        return Check("memory", NOT_VERIFIED, f"{why}; a container sees its host's memory")
    if not memtotal_kib:
        return Check("memory", WARN, "MemTotal could not be read from /proc/meminfo")
    total_gib = memtotal_kib / 1024**2
    needed = gtt_gib + OS_RESERVE_GIB
    # MemTotal is the machine's memory minus the carve-out and firmware; allow the 4 GiB maximum
    # carve-out the guide recommends keeping
    if total_gib + CARVE_OUT_REPORTED_AT_MINIMUM / 1024**3 < needed:
        return Check(
            "memory",
            FAIL,
            f"MemTotal {total_gib:.1f} GiB cannot hold kernel.gtt_gib {gtt_gib} plus "
            f"{OS_RESERVE_GIB} GiB for the OS: lower kernel.gtt_gib",
        )
    return Check("memory", OK, f"MemTotal {total_gib:.1f} GiB, GTT {gtt_gib} GiB")


def object_store(memtotal_kib: int, mib: int, hidden: bool, why: str) -> Check:
    """Ray's object store (serve.object_store_mib) against this node's own memory: the config
    check knows only the 128 GiB class, MemTotal is what the node really has."""
    if hidden:
        return Check("object store", NOT_VERIFIED, f"{why}; a container sees its host's memory")
    if not memtotal_kib:
        return Check("object store", WARN, "MemTotal could not be read from /proc/meminfo")
    limit = int(memtotal_kib / 1024 * OBJECT_STORE_SHARE)
    if mib > limit:
        return Check(
            "object store",
            WARN,
            f"serve.object_store_mib {mib} is more than half of MemTotal ({limit} MiB): "
            "the model and its KV cache need that memory; lower serve.object_store_mib",
        )
    return Check("object store", OK, f"{mib} MiB, at most half of MemTotal ({limit} MiB)")


def carve_out(hw: dict, hidden: bool, why: str) -> Check:
    sizes = hw.get("vram", [])
    if not sizes:
        if hidden:
            return Check("iGPU carve-out", NOT_VERIFIED, why)
        return Check("iGPU carve-out", WARN, "no mem_info_vram_total: is amdgpu loaded?")
    size = max(sizes)
    text = f"mem_info_vram_total {size // 1024**2} MiB"
    if size <= CARVE_OUT_MINIMUM:
        return Check("iGPU carve-out", OK, f"{text}, at most 512 MiB")
    if size <= CARVE_OUT_REPORTED_AT_MINIMUM:
        return Check(
            "iGPU carve-out",
            WARN,
            f"{text}; some boards report 4 GiB at the 512 MB minimum: make sure you {BIOS_SETTING}",
        )
    return Check("iGPU carve-out", WARN, f"{text} takes memory from GTT: {BIOS_SETTING}")


def e810(port: dict, interface: str | None, hidden: bool, why: str) -> Check:
    if port.get("vendor") == INTEL_VENDOR and port.get("device") in E810_DEVICES:
        if port.get("driver") == "ice":
            return Check("E810", OK, f"{interface} {port['vendor']}:{port['device']} on ice")
        return Check("E810", FAIL, f"{interface} is bound to {port.get('driver')}, not ice")
    if hidden:
        return Check("E810", NOT_VERIFIED, why)
    ident = f"{port.get('vendor') or 'virtual'}:{port.get('device') or '-'}"
    return Check("E810", FAIL, f"{interface or 'no data interface'} ({ident}) is not an E810")


def parse_firmware(text: str) -> tuple[int, ...] | None:
    match = re.match(r"(\d+)\.(\d+)", text)
    return (int(match.group(1)), int(match.group(2))) if match else None


def firmware(ethtool: dict, interface: str | None, hidden: bool, why: str) -> Check:
    version = parse_firmware(ethtool.get("firmware-version", ""))
    if version is None:
        if hidden or ethtool.get("driver") != "ice":
            return Check(
                "E810 firmware",
                NOT_VERIFIED,
                why if hidden else f"no ice firmware version on {interface}",
            )
        return Check("E810 firmware", WARN, f"cannot read the firmware version of {interface}")
    text = f"{interface} firmware {ethtool['firmware-version']}"
    if version >= MIN_E810_FIRMWARE:
        return Check("E810 firmware", OK, text)
    return Check("E810 firmware", WARN, f"{text} is older than 4.91: update the NVM")


def rdma_device(devices: list[str], interface: str | None, hidden: bool, why: str) -> Check:
    if devices:
        return Check("RDMA device", OK, f"{interface} -> {', '.join(devices)}")
    if hidden:
        return Check("RDMA device", NOT_VERIFIED, why)
    return Check(
        "RDMA device",
        FAIL,
        f"nothing in /sys/class/net/{interface}/device/infiniband: "
        "is irdma loaded (modprobe irdma)?",
    )


def thunderbolt(
    links: list[tuple[str, str, str, str]], interface: str | None, hidden: bool, why: str
) -> Check:
    """The host-to-host link's own speed: the XDomain behind the data interface (Hardware's
    `thunderbolt`: (interface, XDomain, rx_speed, rx_lanes) of each link), never the fastest
    device on the bus (a dock can be faster than the link)."""
    link = next((x for x in links if x[0] == interface), None)
    if link is None and len(links) == 1:
        link = links[0]  # the link under another name: safety.resolve_interface takes it too
    if link is None:
        if hidden:
            return Check("Thunderbolt link", NOT_VERIFIED, why)
        drives = ", ".join(x[0] for x in links) or "no interface"
        return Check(
            "Thunderbolt link",
            WARN,
            f"no host-to-host link on {interface} (thunderbolt-net drives {drives}): "
            "is the cable between the two nodes in, and thunderbolt_net loaded?",
        )
    name, xdomain, speed, lanes = link
    match = re.match(r"([\d.]+)Gb/s", speed)
    if not match:
        return Check(
            "Thunderbolt link",
            WARN,
            f"{name}'s XDomain {xdomain} reports no speed (rx_speed needs kernel 5.11 or newer)",
        )
    per_lane = float(match.group(1))
    text = f"{name} to the peer (XDomain {xdomain}): {per_lane:g} Gb/s x {lanes} lanes"
    if per_lane >= 20:
        return Check("Thunderbolt link", OK, text)
    return Check(
        "Thunderbolt link",
        WARN,
        f"{text}: the link came up below 20 Gb/s per lane; reseat or replace the cable",
    )

"""Outputs recorded on real hosts (tests/plan/fixtures), and the fact outputs built from them,
shared by the unit and plan tests."""

from __future__ import annotations

import base64
import json
from pathlib import Path

FIXTURES = Path(__file__).resolve().parent / "plan" / "fixtures"


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


def text_files_output(files: dict[str, str | tuple[str, str]], mode: str = "644") -> list[str]:
    """What the TextFiles fact prints for these {path: text or (text, mode)}."""
    lines = []
    for path, value in files.items():
        text, file_mode = value if isinstance(value, tuple) else (value, mode)
        lines.append(f"{path} {file_mode} {base64.b64encode(text.encode()).decode()}")
    return lines


def firewalld_output(text: str | None = None, **zones: dict[str, str]) -> list[str]:
    """The Firewalld fact's output, recorded (fixtures/firewalld-debian13-lab-fresh.txt) or
    `text`, with zone keys replaced in both views: zone -> {key: value}."""
    lines, zone = [], ""
    for line in (text or fixture("firewalld-debian13-lab-fresh.txt")).splitlines():
        if line and not line[0].isspace() and not line.startswith(("state", "==")):
            zone = line.split()[0]
        key = line.strip().partition(":")[0]
        if line.startswith("  ") and key in zones.get(zone, {}):
            line = f"  {key}: {zones[zone][key]}"
        lines.append(line)
    return lines


def interfaces_output(interfaces: list[dict]) -> list[str]:
    """What the NetworkInterfaces fact prints: `ip -j addr` then one sysfs line per interface."""
    ip_json = [
        {
            "ifname": i["name"],
            "address": i["mac"],
            "mtu": i.get("mtu", 1500),
            "operstate": "UP",
            "addr_info": [
                {"local": a.split("/")[0], "prefixlen": int(a.split("/")[1])}
                for a in i.get("addresses", [])
            ],
        }
        for i in interfaces
    ]
    sysfs = [
        f"{i['name']} {i.get('vendor', '-')} {i.get('device', '-')} {i.get('driver', '-')}"
        for i in interfaces
    ]
    return [json.dumps(ip_json), *sysfs]


# A 128 GB-class Strix Halo's memory as the NodeMemory fact prints it. No /proc/meminfo of one was
# recorded; each number comes from a recording:
# - MemTotal: amdgpu printed the TTM size it got with TTM's default limit, half of the RAM the
#   kernel manages (totalram, which /proc/meminfo reports as MemTotal): "TTM size has been set as
#   65867993088" (dmesg-amdgpu-strix-halo-ubuntu2510-gttsize-deprecated.txt, 128 GB, BIOS UMA
#   512M; its amdttm.* arguments are the DKMS module's, not the kernel's ttm) -> 2 x 65867993088 B
#   = 128648424 kB, 122.7 GiB
# - GTT: mem_info_gtt_total 103079215104 (96 GiB) of
#   sysfs-mem_info-gtt-vram-strix-halo-nixos-uma512m-annotated.txt (ttm.pages_limit=25165824)
def strix_halo_memtotal_kib() -> int:
    text = fixture("dmesg-amdgpu-strix-halo-ubuntu2510-gttsize-deprecated.txt")
    ttm = int(text.split("TTM size has been set as ")[1].split()[0].rstrip(","))
    return 2 * ttm // 1024


def strix_halo_gtt_bytes() -> int:
    text = fixture("sysfs-mem_info-gtt-vram-strix-halo-nixos-uma512m-annotated.txt")
    return int(text.split("mem_info_gtt_total")[1].split()[0])


def memory_output(
    weights: list[int] | None = None,
    folder: str = "/home/vllm/.cache/huggingface/hub/models--Qwen--Qwen3-14B/snapshots/abc",
    virt: str = "none",
    sysfs: bool = True,
    cmdline: str = "BOOT_IMAGE=(hd0,gpt2)/vmlinuz ro",
) -> list[str]:
    """The NodeMemory fact's output on the recorded 128 GB-class node; `weights`: the sizes of
    the model's safetensors in its snapshot (None: the model is not on the node)."""
    lines = [f"virt {virt}", f"memtotal {strix_halo_memtotal_kib()}"]
    if sysfs:
        lines.append(f"gtt {strix_halo_gtt_bytes()}")
    lines.append(f"cmdline {cmdline}")
    if weights is not None:
        lines += [f"dir {folder}", *[f"weights {size}" for size in weights]]
    return lines

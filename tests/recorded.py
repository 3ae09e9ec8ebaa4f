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

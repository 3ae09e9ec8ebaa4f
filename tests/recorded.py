"""Outputs recorded on real hosts (tests/plan/fixtures), and the fact outputs built from them,
shared by the unit and plan tests."""

from __future__ import annotations

import base64
import json
import re
import xml.etree.ElementTree as ET
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


def listed_zones(text: str) -> tuple[str, dict[str, dict[str, dict[str, list[str]]]]]:
    """(default zone, {view: {zone: {key: values}}}) of the recorded `firewall-cmd
    --list-all-zones` listings (fixtures/firewalld-debian13-lab-fresh.txt: a `state` line, then
    `== runtime` and `== permanent`, each a listing); tab-indented lines (forward ports, rich
    rules) continue the key before them."""
    default, views = "", {}
    zones: dict[str, dict[str, list[str]]] = {}
    zone: dict[str, list[str]] = {}
    key = ""
    for line in text.splitlines():
        if line.startswith("== "):
            zones = views.setdefault(line[3:].strip(), {})
        elif line.startswith("\t"):
            zone[key].append(line.strip())
        elif line.startswith("  "):
            key, _, value = line.strip().partition(":")
            zone[key] = value.split()
        elif line and not line.startswith("state "):
            name, _, marks = line.partition(" ")
            zone = zones.setdefault(name, {})
            default = name if "default" in marks else default
    return default, views


FIREWALLD_ZONE_FILES = FIXTURES / "firewalld-zones-debian13-lab"
USR_ZONES = "/usr/lib/firewalld/zones"
ETC_ZONES = "/etc/firewalld/zones"
# listing key -> (a{sv} key, its D-Bus signature); firewalld's IMPORT_EXPORT_STRUCTURE
_VARIANTS = {
    "target": ("target", "s"),
    "services": ("services", "as"),
    "ports": ("ports", "a(ss)"),
    "icmp-blocks": ("icmp_blocks", "as"),
    "masquerade": ("masquerade", "b"),
    "forward-ports": ("forward_ports", "a(ssss)"),
    "interfaces": ("interfaces", "as"),
    "sources": ("sources", "as"),
    "rich rules": ("rules_str", "as"),
    "protocols": ("protocols", "as"),
    "source-ports": ("source_ports", "a(ss)"),
    "icmp-block-inversion": ("icmp_block_inversion", "b"),
    "forward": ("forward", "b"),
    "ingress-priority": ("ingress_priority", "i"),
    "egress-priority": ("egress_priority", "i"),
}
# what a zone file's element of each listing key is (firewalld's zone XML)
_ELEMENTS = {"services": "service", "interfaces": "interface", "ports": "port", "sources": "source"}


def zone_settings_reply(settings: dict[str, list[str]], zone_file: str) -> str:
    """busctl's `--json=short` reply to getZoneSettings2 (out signature a{sv}) for a zone listed
    as `settings` whose zone file is `zone_file`.

    Built from firewalld's source, not recorded from a live firewalld: core/fw_zone.py
    get_config_with_settings_dict (the zone file's settings, the default target as "default",
    runtime lists over them), core/io/io_object.py export_config_dict (empty lists and strings
    left out; flags and numbers kept); busctl prints a reply as {"type": SIGNATURE, "data":
    [values]}, a variant as {"type": SIGNATURE, "data": value}, a struct as a list."""
    root = ET.fromstring(zone_file)
    found: dict[str, dict] = {}
    for key in ("short", "description"):
        if root.findtext(key):
            found[key] = {"type": "s", "data": root.findtext(key)}
    for key, values in settings.items():
        name, signature = _VARIANTS[key]
        value: object
        if signature == "b":
            value = values == ["yes"]
        elif signature == "i":
            value = int(values[0])
        elif signature == "s":
            value = values[0]
        elif signature == "a(ss)":
            value = [v.split("/") for v in values]
        elif signature == "a(ssss)":
            value = [[part.partition("=")[2] for part in v.split(":")] for v in values]
        else:
            value = values
        if value or signature in ("b", "i"):
            found[name] = {"type": signature, "data": value}
    return busctl_reply("a{sv}", found)


def busctl_reply(signature: str, value: object) -> str:
    """One value as `busctl --json=short call` prints a reply (compact JSON, UTF-8 as is)."""
    return json.dumps(
        {"type": signature, "data": [value]}, ensure_ascii=False, separators=(",", ":")
    )


def _zone_file(text: str, changes: dict[str, str]) -> str:
    """A zone file with the elements of `changes`' keys replaced, as `firewall-cmd --permanent`
    writes it to /etc/firewalld/zones."""
    root = ET.fromstring(text)
    for key, values in changes.items():
        tag = _ELEMENTS[key]
        for element in root.findall(tag):
            root.remove(element)
        for value in values.split():
            if tag == "port":
                port, _, protocol = value.partition("/")
                ET.SubElement(root, tag, port=port, protocol=protocol)
            elif tag == "source":
                ET.SubElement(root, tag, address=value)
            else:
                ET.SubElement(root, tag, name=value)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode")


# Fedora Workstation's own zone, which its firewalld package installs and makes the default,
# and libvirt's, where libvirt puts its bridges (firewalld's copies of both: fixtures/README.md)
FEDORA_WORKSTATION = FIXTURES / "firewalld-zones-fedora" / "FedoraWorkstation.xml"
LIBVIRT = FIXTURES / "firewalld-zones-fedora" / "libvirt.xml"


def loaded_zone_listing(text: str) -> dict[str, list[str]]:
    """How `firewall-cmd --list-all` lists a zone firewalld loaded from this file and nothing
    changed since: its target, services, protocols, ports, forward flag and its rules of a
    priority and a bare action (libvirt's `rule priority="32767" reject`, as the recorded
    nm-shared zone lists it), every other list empty."""
    root = ET.fromstring(text)
    listing = {key: [] for key in _VARIANTS}
    listing |= {flag: ["no"] for flag in ("masquerade", "icmp-block-inversion")}
    listing |= {number: ["0"] for number in ("ingress-priority", "egress-priority")}
    listing["target"] = [root.get("target", "default")]
    listing["services"] = sorted(e.get("name", "") for e in root.findall("service"))
    listing["ports"] = [f"{e.get('port')}/{e.get('protocol')}" for e in root.findall("port")]
    listing["protocols"] = sorted(e.get("value", "") for e in root.findall("protocol"))
    listing["rich rules"] = [
        f'rule priority="{rule.get("priority")}" {rule[0].tag}' for rule in root.findall("rule")
    ]
    listing["forward"] = ["yes" if root.find("forward") is not None else "no"]
    return listing


def firewalld_output(
    renamed: dict[str, str] | None = None,
    default: str | None = None,
    added: dict[str, Path] | None = None,
    **zones: dict[str, str],
) -> list[str]:
    """The Firewalld fact's output on a lab node: the runtime zones of the recorded listing
    (fixtures/firewalld-debian13-lab-fresh.txt) as firewalld answers them over D-Bus
    (`zone_settings_reply`), and the lab's zone files (fixtures/firewalld-zones-debian13-lab:
    /usr/lib/firewalld/zones of its firewalld 2.3.1) as `grep -aH ''` prints them.

    `zones`: zone -> {key: values} (services, interfaces, ports, sources) replaced in both
    views, the changed zone's file written to /etc/firewalld/zones; `renamed`: {zone: new name};
    `added`: {zone: its file} installed in /usr/lib/firewalld/zones as well (FEDORA_WORKSTATION),
    loaded as is (`loaded_zone_listing`); `default`: the default zone instead of the lab's."""
    renamed = renamed or {}
    lab_default, views = listed_zones(fixture("firewalld-debian13-lab-fresh.txt"))
    default = default or renamed.get(lab_default, lab_default)
    files = {p.stem: p.read_text() for p in sorted(FIREWALLD_ZONE_FILES.glob("*.xml"))}
    loaded = {renamed.get(z, z): (settings, files[z]) for z, settings in views["runtime"].items()}
    for zone, path in (added or {}).items():
        loaded[zone] = (loaded_zone_listing(path.read_text()), path.read_text())
    lines = ["state running", f"default {busctl_reply('s', default)}"]
    paths: dict[str, str] = {}
    for name, (settings, text) in sorted(loaded.items()):
        changes = zones.get(name, {})
        settings = dict(settings, **{key: value.split() for key, value in changes.items()})
        reply = zone_settings_reply(settings, text)
        lines.append(f"runtime {name} {reply}")
        paths[f"{USR_ZONES}/{name}.xml"] = text
        if changes:
            paths[f"{ETC_ZONES}/{name}.xml"] = _zone_file(text, changes)
    lines += [f"{path}:{line}" for path, text in paths.items() for line in text.splitlines()]
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
    """The NodeMemory and ModelWeights facts' output on the recorded 128 GB-class node, as
    `make status`'s one command prints both (each fact reads its own lines); `weights`: the sizes of
    the model's safetensors in its snapshot (None: the model is not on the node)."""
    lines = [f"virt {virt}", f"memtotal {strix_halo_memtotal_kib()}"]
    if sysfs:
        lines.append(f"gtt {strix_halo_gtt_bytes()}")
    lines.append(f"cmdline {cmdline}")
    if weights is not None:
        lines += [f"dir {folder}", *[f"weights {size}" for size in weights]]
    return lines


def versions_output(running: str, nevras: list[str], dnf5: bool = True) -> list[str]:
    """What the InstalledVersions fact prints for this `uname -r` and these installed NEVRA
    lines (as `rpm -qa` prints them): rpm -q lists only the kernel's and firmware's packages."""
    from halo_cluster.node.versions import FIRMWARE_PACKAGES, KERNEL_PACKAGES

    lines = [f"running {running}", *(["dnf5"] if dnf5 else [])]
    for nevra in nevras:
        nevr, _, arch = nevra.rpartition(".")
        name, version, release = nevr.rsplit("-", 2)
        if name in (*KERNEL_PACKAGES, *FIRMWARE_PACKAGES):
            lines.append(f"rpm {name} {version}-{release} {arch}")
    return lines


def recorded_fedora43_versions() -> tuple[str, list[str]]:
    """(uname -r, installed NEVRAs) of the recorded Fedora 43 host
    (uname-and-rpm-kernel-fedora43.txt: `uname -a`, then its kernel packages)."""
    lines = fixture("uname-and-rpm-kernel-fedora43.txt").splitlines()
    return lines[0].split()[2], [line for line in lines[1:] if line.strip()]


def strix_halo_versions() -> tuple[str, list[str]]:
    """(uname -r, installed NEVRAs) of a Fedora 43 Strix Halo: the kernel the recorded E810 host
    runs (ethtool -i: in-kernel ice reports the kernel release), as the recorded Fedora 43 host's
    kernel packages (one kernel: its five packages), and the firmware set recorded on a Fedora 43
    Strix Halo (ROCm#5824: every firmware package at 20260110-1.fc43)."""
    ethtool = fixture("ethtool-i-e810-fedora43-strix-halo.txt")
    running = next(line.split()[1] for line in ethtool.splitlines() if line.startswith("version"))
    version, arch = running.rsplit(".", 1)
    _, recorded = recorded_fedora43_versions()
    names = dict.fromkeys(
        nevra.rsplit(".", 1)[0].rsplit("-", 2)[0] for nevra in recorded if "-6.17.8-" in nevra
    )
    kernels = [f"{name}-{version}.{arch}" for name in names if name.startswith("kernel")]
    return running, kernels + fixture("rpm-qa-firmware-fedora43-strix-halo-rocm5824.txt").split()


def skopeo_digest(name: str = "skopeo-inspect-no-tags-python.json") -> str:
    """What `skopeo inspect --format '{{.Digest}}'` prints for a recorded `skopeo inspect`: its
    top-level `Digest` line (the recording elides parts, so it is not parsed as JSON)."""
    found = re.search(r'^    "Digest": "(sha256:[0-9a-f]{64})",$', fixture(name), re.MULTILINE)
    assert found, name
    return found[1]


def container_image_line(name: str = "podman-container-inspect-foobar-excerpt.json") -> str:
    """What `podman container inspect --format '{{.Name}} {{.ImageName}} {{.Image}}'` prints for
    a recorded inspect: its three values on one line."""
    text = fixture(name)
    values = [re.search(rf'^ +"{key}": "([^"]+)",$', text, re.MULTILINE) for key in KEYS]
    assert all(values), name
    return " ".join(v[1] for v in values if v)


KEYS = ("Name", "ImageName", "Image")


# `nmcli connection show`'s TYPE column as `nmcli -t` prints it
NMCLI_TERSE_TYPES = {"ethernet": "802-3-ethernet", "wifi": "802-11-wireless"}


def nm_profiles_output(name: str, priority: int = 0) -> list[str]:
    """The NmProfiles fact's output for a recorded `nmcli connection show` table (`name`: its
    fixture): each row as `nmcli -t -f UUID,TYPE,DEVICE,NAME` prints it (':' in a name escaped),
    then its settings. The recording has no settings: each profile is taken as bound to the
    device it is active on (as NetworkManager binds its own default profiles: interface-name),
    autoconnect, with `priority` (NOT VERIFIED: no `nmcli -t` recording was found)."""
    lines = fixture(name).splitlines()
    header = lines[0]
    starts = [header.index(column) for column in ("NAME", "UUID", "TYPE", "DEVICE")]
    output = []
    for row in lines[1:]:
        cells = [row[a:b].strip() for a, b in zip(starts, [*starts[1:], None], strict=True)]
        title, uuid, kind, device = cells
        device = "" if device == "--" else device
        escaped = title.replace("\\", "\\\\").replace(":", "\\:")
        output += [
            f"profile {uuid}:{NMCLI_TERSE_TYPES.get(kind, kind)}:{device}:{escaped}",
            f"setting connection.interface-name:{device}",
            "setting connection.autoconnect:yes",
            f"setting connection.autoconnect-priority:{priority}",
        ]
    return output

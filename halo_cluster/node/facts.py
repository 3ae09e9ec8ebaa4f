"""Custom pyinfra facts: each reads one thing from a node in one command.

Every fact is read once per node per run, all of a node's together in one SSH command
(`node/reads.py`), and the roles decide from them; no fact changes anything.
"""

from __future__ import annotations

import base64
import json
import shlex
from dataclasses import dataclass
from typing import TypedDict

from pyinfra.api import FactBase

from halo_cluster.decide.flowcontrol import parse_pause
from halo_cluster.decide.safety import E810_DEVICES, INTEL_VENDOR
from halo_cluster.node.thunderbolt import thunderbolt_links, thunderbolt_links_command


@dataclass(frozen=True)
class TextFile:
    path: str
    mode: str
    text: str


class TextFiles(FactBase[dict[str, TextFile]]):
    """Text files with their mode, exactly as they are: {path: TextFile} for those that exist.

    ``paths`` may hold shell globs (``/boot/loader/entries/*.conf``). Contents travel base64
    encoded so that every byte, including a missing final newline, is kept.
    """

    @staticmethod
    def default() -> dict[str, TextFile]:
        return {}

    def command(self, paths: tuple[str, ...]) -> str:
        # /proc files report size 0: cat, not stat, decides what they hold
        return (
            f'for f in {" ".join(paths)}; do [ -f "$f" ] || continue; '
            'printf "%s %s %s\\n" "$f" "$(stat -c %a "$f")" "$(base64 -w0 < "$f")"; done'
        )

    def process(self, output: list[str]) -> dict[str, TextFile]:
        files = {}
        for line in output:
            path, mode, *encoded = line.split(" ")
            text = base64.b64decode("".join(encoded)).decode()
            files[path] = TextFile(path, mode, text)
        return files


class Interface(TypedDict):
    """One interface of `NetworkInterfaces`; vendor, device and driver are None for a virtual
    interface (no /sys/class/net/IF/device)."""

    mac: str | None
    mtu: int | None
    operstate: str | None
    addresses: list[str]  # CIDR
    vendor: str | None  # PCI ids as sysfs writes them: 0x8086
    device: str | None
    driver: str | None


class NetworkInterfaces(FactBase[dict[str, Interface]]):
    """Network interfaces with their PCI identity and driver (sysfs) and addresses (`ip -j`):
    {name: Interface}."""

    @staticmethod
    def default() -> dict[str, Interface]:
        return {}

    def command(self) -> str:
        return (
            "ip -j addr show; for d in /sys/class/net/*; do n=${d##*/}; "
            'printf "%s %s %s %s\\n" "$n" "$(cat $d/device/vendor 2>/dev/null || echo -)" '
            '"$(cat $d/device/device 2>/dev/null || echo -)" '
            '"$(basename "$(readlink $d/device/driver 2>/dev/null)" 2>/dev/null || echo -)"; done'
        )

    def process(self, output: list[str]) -> dict[str, Interface]:
        interfaces: dict[str, Interface] = {}
        for item in json.loads(output[0]):
            interfaces[item["ifname"]] = {
                "mac": item.get("address"),
                "mtu": item.get("mtu"),
                "operstate": item.get("operstate"),
                "addresses": [f"{a['local']}/{a['prefixlen']}" for a in item.get("addr_info", [])],
                "vendor": None,
                "device": None,
                "driver": None,
            }
        for line in output[1:]:
            name, vendor, device, driver = (line.split(" ") + ["-"] * 4)[:4]
            if name in interfaces:
                interfaces[name].update(
                    vendor=None if vendor == "-" else vendor,
                    device=None if device == "-" else device,
                    driver=None if driver in ("-", "") else driver,
                )
        return interfaces


class SshSession(TypedDict):
    local: str  # the node's address the session reached
    interface: str  # the interface the route back to the client leaves by ("" unknown)


class SshSessionInterfaces(FactBase[list[SshSession]]):
    """Interfaces that carry an established SSH session to this node, ours included.

    For every established connection to the SSH port: the local address, and the interface the
    route back to the client leaves by. Works without $SSH_CONNECTION, which sudo drops.
    """

    @staticmethod
    def default() -> list[SshSession]:
        return []

    def command(self, port: int = 22) -> str:
        route = "ip -o route get \"$peer\" | sed -n 's/.* dev \\([^ ]*\\).*/\\1/p'"
        return (
            f"ss -Htn state established '( sport = :{int(port)} )' | "
            "while read -r _ _ local peer _; do peer=${peer%:*}; peer=$(echo $peer | tr -d '[]'); "
            f'echo "${{local%:*}} $({route})"; done'
        )

    def process(self, output: list[str]) -> list[SshSession]:
        sessions: list[SshSession] = []
        for line in output:
            local, _, interface = line.partition(" ")
            sessions.append(SshSession(local=local.strip("[]"), interface=interface.strip()))
        return sessions


class OsRelease(FactBase[dict[str, str]]):
    """/etc/os-release as a dict (ID, VERSION_ID, PRETTY_NAME, ...)."""

    @staticmethod
    def default() -> dict[str, str]:
        return {}

    def command(self) -> str:
        return "cat /etc/os-release"

    def process(self, output: list[str]) -> dict[str, str]:
        release = {}
        for line in output:
            key, sep, value = line.partition("=")
            if sep and not key.startswith("#"):
                parts = shlex.split(value) or [""]
                release[key.strip()] = parts[0]
        return release


class HardwareInfo(TypedDict):
    """What `Hardware` reads, for the preflight checks and the roles (`NodeContext.hardware`)."""

    virt: str  # systemd-detect-virt --container: "none" on a machine
    cpu: str  # /proc/cpuinfo's model name
    vram: list[int]  # bytes of each GPU's carve-out (mem_info_vram_total)
    ethtool: dict[str, str]  # the data port's `ethtool -i`: driver, firmware-version, ...
    pause: dict[str, str]  # its `ethtool -a` (flowcontrol.parse_pause): {} without pause support
    rdma: list[str]  # the data port's RDMA devices in sysfs
    pci: str  # the data port's PCI function as rdma_rename reads it (rdmatools.parse_pci), or ""
    # each host-to-host Thunderbolt link: (interface, XDomain, rx_speed, rx_lanes)
    thunderbolt: list[tuple[str, str, str, str]]
    modules: list[str]  # loaded of ice, irdma, thunderbolt_net
    infiniband: bool  # /dev/infiniband exists


class Hardware(FactBase[HardwareInfo]):
    """What the preflight checks read: virtualization, CPU, iGPU carve-out, the data port's
    driver, firmware and RDMA device, thunderbolt link speeds, /dev/infiniband. The node's
    memory is `NodeMemory`'s (halo_cluster/node/memory.py)."""

    @staticmethod
    def default() -> HardwareInfo:
        return HardwareInfo(
            virt="none",
            cpu="",
            vram=[],
            ethtool={},
            pause={},
            rdma=[],
            pci="",
            thunderbolt=[],
            modules=[],
            infiniband=False,
        )

    def command(self, interface: str | None) -> str:
        return hardware_command(shlex.quote(interface or "none"))

    def process(self, output: list[str]) -> HardwareInfo:
        return hardware_process(output)


def hardware_command(port: str) -> str:
    """Hardware's command for the data port `port`, a shell word (quoted name or "$port")."""
    return (
        'echo "virt $(systemd-detect-virt --container 2>/dev/null || echo none)"; '
        "echo \"cpu $(grep -m1 '^model name' /proc/cpuinfo | cut -d: -f2-)\"; "
        "for f in /sys/class/drm/card*/device/mem_info_vram_total; do "
        '[ -f "$f" ] && echo "vram $(cat "$f")"; done; '
        f"ethtool -i {port} 2>/dev/null | sed 's/^/ethtool /'; "
        f"ethtool -a {port} 2>/dev/null | sed 's/^/pause /'; "
        f"ls /sys/class/net/{port}/device/infiniband 2>/dev/null | sed 's/^/rdma /'; "
        # what rdma_rename names the RDMA device by at its next add (rdmatools.persistent_name)
        f"pcidev=/sys/class/net/{port}/device; "
        'if [ "$(basename "$(readlink -f "$pcidev/subsystem" 2>/dev/null)")" = pci ]; then '
        'echo "pci $(basename "$(readlink -f "$pcidev")")'
        ' ari=$(cat "$pcidev/ari_enabled" 2>/dev/null)'
        " header=$(od -An -tx1 -j14 -N1 \"$pcidev/config\" 2>/dev/null | tr -d ' ')"
        ' vf=$([ -e "$pcidev/physfn" ] && echo 1 || echo 0)'
        ' onboard=$(cat "$pcidev/acpi_index" 2>/dev/null || cat "$pcidev/index" 2>/dev/null)'
        ' node=$(cat "$pcidev"/infiniband/*/node_type 2>/dev/null | head -n1 | cut -d: -f1)'
        ' link=$(cat "$pcidev"/infiniband/*/ports/1/link_layer 2>/dev/null | head -n1)"; '
        "fi; "
        f"{thunderbolt_links_command()}; "
        'for m in ice irdma thunderbolt_net; do [ -d /sys/module/$m ] && echo "module $m"; '
        "done; [ -e /dev/infiniband ] && echo infiniband; true"
    )


def hardware_process(output: list[str]) -> HardwareInfo:
    found = Hardware.default()
    pause = []
    for line in output:
        kind, _, rest = line.partition(" ")
        if kind in ("virt", "cpu"):
            found[kind] = rest.strip()
        elif kind == "vram":
            found["vram"].append(int(rest))
        elif kind == "ethtool":
            key, _, value = rest.partition(":")
            found["ethtool"][key.strip()] = value.strip()
        elif kind == "pause":
            pause.append(rest)
        elif kind == "rdma":
            found["rdma"].append(rest.strip())
        elif kind == "pci":
            found["pci"] = rest.strip()
        elif kind == "tb":
            found["thunderbolt"] += thunderbolt_links([line])
        elif kind == "module":
            found["modules"].append(rest.strip())
        elif kind == "infiniband":
            found["infiniband"] = True
    found["pause"] = parse_pause("\n".join(pause))
    return found


class DataPort(TypedDict):
    port: str | None  # None when no single port matched
    hardware: HardwareInfo


class DataPortHardware(FactBase[DataPort]):
    """Hardware of the data port the node finds itself, by MAC or (`mac` None) as the one E810
    port of `interface: auto`, as safety.resolve_interface does: the deploy reads it with
    everything else, before the safety check resolves the port from the interfaces."""

    @staticmethod
    def default() -> DataPort:
        return DataPort(port=None, hardware=Hardware.default())

    def command(self, mac: str | None) -> str:
        if mac:
            match = f'[ "$(cat "$d/address" 2>/dev/null)" = {shlex.quote(mac.lower())} ]'
        else:
            devices = "|".join(sorted(E810_DEVICES))
            match = (
                f'[ "$(cat "$d/device/vendor" 2>/dev/null)" = {INTEL_VENDOR} ] && '
                f'case "$(cat "$d/device/device" 2>/dev/null)" in ({devices}) true;; '
                "(*) false;; esac"
            )
        return (
            f'ports=$(for d in /sys/class/net/*; do {match} && echo "${{d##*/}}"; done); '
            "set -- $ports; if [ $# -eq 1 ]; then port=$1; else port=none; fi; "
            'echo "port $port"; ' + hardware_command('"$port"')
        )

    def process(self, output: list[str]) -> DataPort:
        found = bool(output) and output[0].startswith("port ")
        port = output[0].removeprefix("port ") if found else "none"
        return DataPort(
            port=None if port == "none" else port,
            hardware=hardware_process(output[1:] if found else output),
        )


IMAGE_ID = "podman image inspect --format '{{.Id}}' "
CONTAINER_IMAGE = "podman container inspect --format '{{.Image}}' "


def as_user(user: str, command: str) -> str:
    """Run `command` as `user` in its systemd user session (rootless podman and toolbox need
    XDG_RUNTIME_DIR and the session bus; runuser alone leaves them unset)."""
    uid = f"$(id -u {shlex.quote(user)})"
    return (
        f"runuser -u {shlex.quote(user)} -- env -C / XDG_RUNTIME_DIR=/run/user/{uid} "
        f"DBUS_SESSION_BUS_ADDRESS=unix:path=/run/user/{uid}/bus {command}"
    )

"""Parsers for the RDMA tools' output: `rdma link`, `ibv_devinfo -v`, perftest results; and the
name rdma-core's udev rule gives an RDMA device (`persistent_name`), which RCCL's pin names.

Unit-tested against outputs recorded on real hosts (tests/plan/fixtures); used by the
verification checks in tests/infra.
"""

from __future__ import annotations

import ipaddress
import re
from typing import TypedDict

MEBIBYTE = 1024 * 1024


class RdmaLink(TypedDict):
    """One `rdma link` port; a field the line does not give is ""."""

    device: str
    port: str
    state: str
    physical_state: str
    netdev: str


def parse_rdma_link(text: str) -> list[RdmaLink]:
    """`rdma link` lines, current (`rocep1s0f0/1`) and legacy (`irdma0/1`) names, and native IB
    lines with subnet_prefix/lid fields: [{"device", "port", "state", "physical_state",
    "netdev"}]."""
    links: list[RdmaLink] = []
    for line in text.splitlines():
        fields = line.split()
        if len(fields) < 2 or fields[0] != "link":
            continue
        device, _, port = fields[1].partition("/")
        pairs = dict(zip(fields[2::2], fields[3::2], strict=False))
        links.append(
            RdmaLink(
                device=device,
                port=port,
                state=pairs.get("state", ""),
                physical_state=pairs.get("physical_state", ""),
                netdev=pairs.get("netdev", ""),
            )
        )
    return links


class PciFunction(TypedDict):
    """The data port's PCI function as rdma-core's rdma_rename reads it (the Hardware fact's
    `pci` line): where the RDMA device's persistent name comes from."""

    address: str  # domain:bus:slot.function, as /sys/bus/pci/devices names it
    ari: bool  # ari_enabled: the function number spans slot and function
    multifunction: bool  # bit 7 of the config space's header type
    virtual: bool  # a VF (physfn exists)
    onboard: int | None  # acpi_index, else the SMBIOS index; None without either
    protocol: str | None  # the kernel's for its RDMA device (`rdma_protocol`), None without one


ONBOARD_INDEX_MAX = 16 * 1024 - 1  # rdma_rename's, as systemd's net_id


def parse_pci(line: str) -> PciFunction | None:
    """The Hardware fact's `pci ADDRESS ari= header= vf= onboard=` line (without `pci`)."""
    words = line.split() or [""]
    address = words[0]
    if not re.fullmatch(r"[0-9a-f]{4,}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]", address):
        return None
    fields = dict(pair.partition("=")[::2] for pair in words[1:])
    onboard = fields.get("onboard", "")
    # the kernel's protocol names (nldev's RDMA_NLDEV_ATTR_DEV_PROTOCOL), read from sysfs: node
    # type 4 is an RNIC (iWARP, irdma's iw mode); a CA over Ethernet is RoCE, else InfiniBand
    node_type, link = fields.get("node", ""), fields.get("link", "")
    protocol = "iw" if node_type == "4" else {"Ethernet": "roce", "InfiniBand": "ib"}.get(link)
    return PciFunction(
        address=address,
        ari=fields.get("ari") == "1",
        multifunction=int(fields.get("header") or "0", 16) & 0x80 != 0,
        virtual=fields.get("vf") == "1",
        onboard=int(onboard) if onboard.isdigit() else None,
        protocol=protocol if node_type in ("1", "4") else None,
    )


def persistent_name(pci: PciFunction | None) -> str | None:
    """The name rdma-core's udev rule (60-rdma-persistent-naming.rules: `rdma_rename %k
    NAME_FALLBACK`) gives the port's RDMA device when it is added, at the boot after rdma-core
    is installed: its protocol's prefix (`roce` for irdma in RoCE mode, `iw` in iWARP), then its
    onboard index if the firmware gives one, else its PCI location (kernel-boot/rdma_rename.c,
    by_onboard then by_pci). None where it is not derived here: no PCI function, no RDMA device
    on it, or a VF (named after its PF and VF number)."""
    if not pci or pci["virtual"] or not pci["protocol"]:
        return None
    protocol = pci["protocol"]
    if pci["onboard"] is not None and pci["onboard"] <= ONBOARD_INDEX_MAX:
        return f"{protocol}o{pci['onboard']}"
    domain, bus, rest = pci["address"].split(":")
    slot, function = int(rest.split(".")[0], 16), int(rest.split(".")[1])
    if pci["ari"]:
        function += slot * 8  # ARI: slot and function are one 8-bit function number
    name = protocol + (f"P{int(domain, 16)}" if int(domain, 16) else "")
    # by_pci would name a device in a numbered hotplug slot `s<slot number>`, but its find_sun
    # never matches (sscanf "%s.%s" reads the whole address into the first %s): p<bus>s<slot>
    name += f"p{int(bus, 16)}s{slot}"
    return name + (f"f{function}" if function or pci["multifunction"] else "")


def hca_pin(names: list[str]) -> str:
    """NCCL_IB_HCA for port 1 of whichever of `names` the device has: a leading `=` makes each
    entry of the comma list an exact name, `:1` the port (NCCL's parseStringList and
    matchIfList, src/misc/utils.cc, which RCCL carries)."""
    return "=" + ",".join(f"{name}:1" for name in names)


def port_state(devinfo: str, port: int = 1) -> str | None:
    """`state` of a port in `ibv_devinfo` output (PORT_ACTIVE, PORT_DOWN, ...)."""
    match = re.search(rf"port:\s+{port}\n(.*?)(?:\n\s*port:|\Z)", devinfo, re.DOTALL)
    if not match:
        return None
    state = re.search(r"^\s*state:\s+(\S+)", match.group(1), re.MULTILINE)
    return state.group(1) if state else None


def ibv_devices(text: str) -> list[str]:
    """The device names `ibv_devices` lists (rdma-core's libibverbs/examples/device_list.c: a
    `device  node GUID` header, a dashed rule, then one `NAME GUID` row per device)."""
    rows = [line.split() for line in text.splitlines()]
    return [row[0] for row in rows if len(row) == 2 and not row[0].startswith("-")]


def roce_v2_gid_index(devinfo: str, address: str) -> int | None:
    """The GID index whose GID is `address` (IPv4-mapped) with type RoCE v2, or None."""
    wanted = ipaddress.IPv4Address(address)
    for index, gid, kind in re.findall(r"GID\[\s*(\d+)\]:\s+(\S+),\s+(RoCE v\d)", devinfo):
        try:
            mapped = ipaddress.IPv6Address(gid).ipv4_mapped
        except ValueError:
            continue
        if mapped == wanted and kind == "RoCE v2":
            return int(index)
    return None


def _result_row(text: str, first_column: str) -> dict[str, str] | None:
    """perftest's result table: the header starting with `first_column` and the row below it."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.strip().startswith(first_column) and i + 1 < len(lines):
            # columns: `#name`, or words ending in a `[unit]` ("BW average[MiB/sec]")
            header = re.findall(r"#\w+|[^\s\[\]#][^\[\]#]*?\[[^\]]+\]", line)
            values = lines[i + 1].split()
            return dict(zip(header, values, strict=False))
    return None


def parse_latency(text: str) -> dict[str, float] | None:
    """ib_write_lat: {"t_min", "t_max", "t_typical", "t_avg", ...} in microseconds."""
    row = _result_row(text, "#bytes")
    if not row:
        return None
    result = {}
    for key, value in row.items():
        match = re.match(r"(t_\w+)\[usec\]", key)
        if match:
            result[match.group(1)] = float(value)
    return result or None


def parse_bandwidth_gbps(text: str) -> float | None:
    """ib_write_bw: average bandwidth in Gb/s, from `BW average[Gb/sec]`, `[MiB/sec]`, or older
    perftest's `[MB/sec]` (which perftest always counted in 2^20 bytes)."""
    row = _result_row(text, "#bytes")
    if not row:
        return None
    for key, value in row.items():
        match = re.match(r"BW average\[(Gb|MiB|MB)/sec\]", key)
        if match:
            number = float(value)
            return number if match.group(1) == "Gb" else number * MEBIBYTE * 8 / 1e9
    return None

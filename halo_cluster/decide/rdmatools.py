"""Parsers for the RDMA tools' output: `rdma link`, `ibv_devinfo -v`, perftest results.

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

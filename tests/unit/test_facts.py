"""Fact parsers against outputs of the shapes recorded on real hosts."""

from __future__ import annotations

import base64
import importlib
import importlib.util
import json
import typing
from typing import Any

from pyinfra.api import FactBase

from halo_cluster import roles
from halo_cluster.node import facts, memory, reads
from halo_cluster.node.facts import NetworkInterfaces, OsRelease, SshSessionInterfaces, TextFiles
from halo_cluster.roles.network.facts import NmActiveConnections
from tests.recorded import fixture


def test_os_release_of_fedora_43() -> None:
    release = OsRelease().process(fixture("os-release-fedora43-workstation.txt").splitlines())
    assert release["ID"] == "fedora"
    assert release["VERSION_ID"] == "43"
    assert release["PRETTY_NAME"] == "Fedora Linux 43 (Workstation Edition)"
    assert release["VERSION_CODENAME"] == ""


def test_text_files_keep_every_byte() -> None:
    text = fixture("bls-entry-rhel10.conf") + "no final newline"
    line = f"/boot/loader/entries/x.conf 644 {base64.b64encode(text.encode()).decode()}"
    empty = "/etc/kernel/cmdline 600 "
    files = TextFiles().process([line, empty])
    assert files["/boot/loader/entries/x.conf"].text == text
    assert files["/etc/kernel/cmdline"].text == ""
    assert files["/etc/kernel/cmdline"].mode == "600"


def test_network_interfaces_join_ip_json_and_sysfs() -> None:
    ip_json = json.dumps(
        [
            {
                "ifname": "enp194s0np0",
                "address": "6c:fe:54:00:00:01",
                "mtu": 9000,
                "operstate": "UP",
                "addr_info": [{"local": "192.168.100.1", "prefixlen": 30}],
            },
            {"ifname": "thunderbolt0", "address": "02:a1:59:56:2c:c2", "mtu": 1500},
        ]
    )
    found = NetworkInterfaces().process(
        [ip_json, "enp194s0np0 0x8086 0x1592 ice", "thunderbolt0 - - thunderbolt-net"]
    )
    assert found["enp194s0np0"]["vendor"] == "0x8086"
    assert found["enp194s0np0"]["device"] == "0x1592"
    assert found["enp194s0np0"]["driver"] == "ice"
    assert found["enp194s0np0"]["addresses"] == ["192.168.100.1/30"]
    assert found["thunderbolt0"]["vendor"] is None
    assert found["thunderbolt0"]["driver"] == "thunderbolt-net"


def test_ssh_sessions() -> None:
    assert SshSessionInterfaces().process(["10.0.0.11 eno1", "[fe80::1] enp3s0"]) == [
        {"local": "10.0.0.11", "interface": "eno1"},
        {"local": "fe80::1", "interface": "enp3s0"},
    ]


def test_nm_active_connections_from_recorded_names() -> None:
    # names and devices of nmcli-connection-show-strix-halo-fedora43-pc1.txt, in -t form
    header, *rows = fixture("nmcli-connection-show-strix-halo-fedora43-pc1.txt").splitlines()
    uuid, device = header.index("UUID"), header.index("DEVICE")
    terse = [f"{row[:uuid].strip()}:{row[device:].strip()}" for row in rows]
    active = NmActiveConnections().process([*terse, "a\\:b:eth9"])
    assert active["Kabelgebundene Verbindung 1"] == "eno1"
    assert active["thunderbolt0"] == "thunderbolt0"
    assert active["a:b"] == "eth9"


def _facts() -> list[type[FactBase]]:
    """Every custom fact: the node layer's and each role's (its facts module, where it has one)."""
    modules = [facts, memory, reads]
    modules += [
        importlib.import_module(f"{r.__name__}.facts")
        for r in roles.all_roles()
        if importlib.util.find_spec(f"{r.__name__}.facts")
    ]
    return [
        value
        for module in modules
        for value in vars(module).values()
        if isinstance(value, type)
        and issubclass(value, FactBase)
        and value.__module__ == module.__name__
    ]


def _records(kind: Any) -> list[Any]:
    """The record types inside a fact's declared type: a list's items, a mapping's values."""
    origin, arguments = typing.get_origin(kind), typing.get_args(kind)
    if origin is list:
        return [arguments[0], *_records(arguments[0])]
    if origin is dict:
        return _records(arguments[1])
    return []


def test_every_custom_fact_is_typed_and_its_records_are_named() -> None:
    """FactBase[T] as pyinfra's own facts: a record (a list's item, a mapping's value) is a
    TypedDict or dataclass, never a bare dict whose keys only its parser knows."""
    found = _facts()
    assert len(found) > 10, found
    for fact in found:
        (declared,) = [typing.get_args(b)[0] for b in fact.__orig_bases__]
        assert all(typing.get_origin(r) is not dict for r in _records(declared)), fact

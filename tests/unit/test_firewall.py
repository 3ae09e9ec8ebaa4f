"""firewalld decisions on plain values: zones of interfaces, ports a zone lets in."""

from __future__ import annotations

from halo_cluster.node import firewalld
from halo_cluster.node.firewalldfact import Firewalld
from tests.recorded import FEDORA_WORKSTATION as FEDORA
from tests.recorded import firewalld_output

RAY = [6379, 6380, 10001, 10002, 10199]


def state(**zones: dict[str, str]) -> dict:
    return Firewalld().process(firewalld_output(**zones))


def test_an_interface_in_no_zone_is_in_the_default_zone() -> None:
    found = state(trusted={"interfaces": "enp1s0f0np0"})
    assert firewalld.zone_of(found, "enp1s0f0np0") == "trusted"
    assert firewalld.zone_of(found, "mgmt0") == "public"


def test_management_zones_leave_out_the_data_link_and_loopback() -> None:
    found = state(trusted={"interfaces": "enp1s0f0np0"}, home={"interfaces": "eno1"})
    zones = firewalld.management_zones(found, ["eno1", "enp1s0f0np0", "lo", "wlan0"], "enp1s0f0np0")
    assert zones == {"home", "public"}


def test_port_lists_and_targets() -> None:
    assert firewalld.open_ports({"ports": ["1025-65535/tcp"]}, RAY) == RAY
    assert firewalld.open_ports({"ports": ["1025-65535/udp"]}, RAY) == []
    assert firewalld.open_ports({"ports": ["6379/tcp", "8000/tcp"]}, RAY) == [6379]
    assert firewalld.open_ports({"target": ["ACCEPT"], "ports": []}, RAY) == RAY
    assert firewalld.open_ports({"target": ["default"], "ports": []}, RAY) == []
    # a bare rule rejecting the rest: ACCEPT is for what is forwarded (libvirt's, nm-shared's)
    last = ['rule priority="32767" reject']
    assert firewalld.open_ports({"target": ["ACCEPT"], "rich rules": last}, RAY) == []
    # one family's, or one with a match, leaves the other traffic accepted
    ipv4 = ['rule family="ipv4" reject', 'rule service name="ssh" reject']
    assert firewalld.open_ports({"target": ["ACCEPT"], "rich rules": ipv4}, RAY) == RAY


def test_exposed_counts_the_permanent_view_and_the_trusted_zone() -> None:
    found = state()
    found["permanent"]["public"]["ports"] = ["10000-10100/tcp"]
    assert firewalld.exposed_in(found, "public", RAY) == [10001, 10002]
    assert firewalld.exposed_in(state(), "public", RAY) == []
    assert firewalld.exposed_in(state(), "trusted", RAY) == RAY


def test_zones_with_our_service_per_view() -> None:
    found = state(public={"services": "dhcpv6-client halo-vllm ssh"})
    found["permanent"]["public"]["services"] = ["ssh"]
    assert firewalld.zones_with_service(found, "halo-vllm", "runtime") == {"public"}
    assert firewalld.zones_with_service(found, "halo-vllm", "permanent") == set()


def test_zones_in_effect_are_every_networks_and_every_sources() -> None:
    found = state(
        trusted={"interfaces": "enp1s0f0np0"},
        home={"interfaces": "wlan0"},
        internal={"sources": "10.1.0.0/16"},
    )
    zones = firewalld.zones_in_effect(found, ["eno1", "enp1s0f0np0", "lo", "wlan0"], "enp1s0f0np0")
    # eno1 is in no zone (the default, public); the data link and loopback are left out
    assert zones == {"home": ["wlan0"], "internal": ["source 10.1.0.0/16"], "public": ["eno1"]}


def test_fedora_workstations_zone_file_lets_rays_ports_in_by_its_tcp_range() -> None:
    found = Firewalld().process(
        firewalld_output(default="FedoraWorkstation", added={"FedoraWorkstation": FEDORA})
    )
    assert firewalld.zone_of(found, "eno1") == "FedoraWorkstation"
    assert firewalld.exposed_in(found, "FedoraWorkstation", RAY) == RAY
    # the tcp entry is the one to remove; the udp range lets no TCP port in
    assert firewalld.port_entries(found, "FedoraWorkstation", RAY) == ["1025-65535/tcp"]
    assert firewalld.port_entries(found, "public", RAY) == []

"""The firewall role planned on a lab node's firewalld (tests/recorded.py firewalld_output): vLLM's
port let in on the management side only on the head with `listen: all`, closed again otherwise,
Ray's ports never, a zone of any of the node's networks that lets them in refusing the node
(Fedora Workstation's own zone file, recorded), and the data link back in the trusted zone."""

from __future__ import annotations

from tests.plan.harness import Plan, plan
from tests.plan.nodes import (
    E810,
    LOOPBACK,
    MGMT,
    cluster,
    converged_node,
    plan_both,
    serve_cluster,
    user_node,
)
from tests.recorded import FEDORA_WORKSTATION, LIBVIRT, firewalld_output

SERVICE_FILE = "/etc/firewalld/services/halo-vllm.xml"
OPEN_ALL = ", listen: all, api_key_file: key"
WIFI = {"name": "wlp1s0", "mac": "9c:6b:00:00:00:02", "addresses": ["192.168.1.20/24"]}
VIRBR = {"name": "virbr0", "mac": "52:54:00:00:00:01", "addresses": ["192.168.122.1/24"]}
FIX = (
    "remove 1025-65535/tcp from it (firewall-cmd --permanent --zone=FedoraWorkstation "
    "--remove-port=1025-65535/tcp && firewall-cmd --reload) or put eno1 in a stricter zone"
)


def fedora_workstation(**zones: dict[str, str]) -> list[str]:
    """firewalld as Fedora Workstation ships it: its FedoraWorkstation zone (the real file:
    1025-65535 tcp and udp let in) installed and the default zone."""
    added = {"FedoraWorkstation": FEDORA_WORKSTATION}
    return firewalld_output(default="FedoraWorkstation", added=added, **zones)


def firewall_ops(result: Plan, node: str) -> list[str]:
    return [op.name for op in result.ops[node] if op.name.startswith("Firewall") and op.commands]


def plan_serving(serve: str, tmp_path, firewall: list[str] | None = None, **node) -> Plan:
    (tmp_path / "key").write_text("sk-test\n")
    cluster = serve_cluster(serve=serve, tmp_path=tmp_path)
    facts = {
        n.name: user_node(firewall=firewall or firewalld_output(), **node) for n in cluster.nodes
    }
    return plan(cluster, facts)


def test_listen_all_opens_vllm_in_the_management_zone_on_the_head_only(tmp_path) -> None:
    result = plan_serving(OPEN_ALL, tmp_path)
    assert firewall_ops(result, "halo1") == [
        f"Firewall | firewalld service {SERVICE_FILE}",
        "Firewall | Reload firewalld (its services changed)",
        "Firewall | Open vLLM's port in zone public",
    ]
    assert '<port protocol="tcp" port="8000"/>' in result.uploads("halo1")[SERVICE_FILE]
    assert any(
        c.startswith("firewall-cmd --permanent --zone=public --add-service=halo-vllm && ")
        for c in result.commands("halo1")
    )
    assert firewall_ops(result, "halo2") == []


def test_listen_data_opens_nothing(tmp_path) -> None:
    result = plan_serving("", tmp_path)
    assert firewall_ops(result, "halo1") == firewall_ops(result, "halo2") == []


def test_converged_listen_all_changes_nothing(tmp_path) -> None:
    first = plan_serving(OPEN_ALL, tmp_path)
    opened = firewalld_output(public={"services": "dhcpv6-client halo-vllm ssh"})
    service = (first.uploads("halo1")[SERVICE_FILE], "644")
    again = plan_serving(OPEN_ALL, tmp_path, opened, files={SERVICE_FILE: service})
    assert firewall_ops(again, "halo1") == []


def test_back_to_listen_data_closes_the_port_and_removes_the_service(tmp_path) -> None:
    opened = firewalld_output(public={"services": "dhcpv6-client halo-vllm ssh"})
    result = plan_serving("", tmp_path, opened, files={SERVICE_FILE: "<service/>\n"})
    assert firewall_ops(result, "halo1") == [
        "Firewall | Close vLLM's port in zone public",
        f"Firewall | Remove {SERVICE_FILE}",
    ]
    assert any("--remove-service=halo-vllm" in c for c in result.commands("halo1"))


def test_fedora_workstations_default_zone_refuses_a_ray_node_before_anything(tmp_path) -> None:
    result = plan_serving("", tmp_path, fedora_workstation())
    for node in ("halo1", "halo2"):
        assert result.refused[node].startswith(
            "zone FedoraWorkstation (eno1; the default zone) lets Ray's ports in "
            "(6379-6385, 10001-10199): anyone there can run code on the cluster; "
        ), result.refused[node]
        assert FIX in result.refused[node]
        assert result.names(node) == []  # refused in the preflight: nothing changes


def test_a_zone_of_a_network_ssh_does_not_use_refuses_too(tmp_path) -> None:
    # SSH comes in on eno1 (public); the Wi-Fi is in the default FedoraWorkstation zone
    firewall = fedora_workstation(public={"interfaces": "eno1"})
    result = plan_serving("", tmp_path, firewall, interfaces=[LOOPBACK, MGMT, E810, WIFI])
    # the data port, in the default zone too before its profile moves it to trusted, is not named
    assert result.refused["halo1"].startswith(
        "zone FedoraWorkstation (wlp1s0; the default zone) lets Ray's ports in (6379-6385, "
    ), result.refused["halo1"]


def test_a_zone_with_a_source_refuses_whatever_interface_it_comes_on(tmp_path) -> None:
    firewall = firewalld_output(home={"sources": "192.168.1.0/24", "ports": "1025-65535/tcp"})
    result = plan_serving("", tmp_path, firewall)
    assert result.refused["halo1"].startswith(
        "zone home (source 192.168.1.0/24) lets Ray's ports in (6379-6385, 10001-10199)"
    ), result.refused["halo1"]


def test_an_accept_zone_refuses_with_only_the_stricter_zone_to_fix_it(tmp_path) -> None:
    firewall = firewalld_output(trusted={"interfaces": "wlp1s0"})
    result = plan_serving("", tmp_path, firewall, interfaces=[LOOPBACK, MGMT, E810, WIFI])
    assert result.refused["halo1"] == (
        "zone trusted (wlp1s0) lets Ray's ports in (6379-6385, 10001-10199): anyone there can "
        "run code on the cluster; put wlp1s0 in a stricter zone (`nmcli connection modify "
        "PROFILE connection.zone public`; for the default zone's, `firewall-cmd "
        "--set-default-zone=public`)"
    )


def test_libvirts_accept_zone_refuses_the_host_what_it_does_not_list(tmp_path, caplog) -> None:
    # libvirt's zone (its real file): target ACCEPT for what is forwarded, and a last rich rule
    # that rejects whatever else comes to the host
    caplog.set_level("INFO")
    firewall = firewalld_output(added={"libvirt": LIBVIRT}, libvirt={"interfaces": "virbr0"})
    result = plan_serving("", tmp_path, firewall, interfaces=[LOOPBACK, MGMT, E810, VIRBR])
    assert result.refused == {}
    assert "lets Ray's ports in: libvirt (virbr0), public (eno1))" in caplog.text


def test_the_data_link_alone_in_the_open_zone_is_no_refusal(tmp_path, caplog) -> None:
    # before the first deploy the data port is in the default zone; eno1 is in public
    caplog.set_level("INFO")
    result = plan_serving("", tmp_path, fedora_workstation(public={"interfaces": "eno1"}))
    assert result.refused == {}
    assert "preflight firewall: OK (no zone lets Ray's ports in: public (eno1))" in caplog.text


def test_an_open_zone_is_no_refusal_while_nothing_of_ours_listens(tmp_path) -> None:
    facts = {n: user_node(firewall=fedora_workstation()) for n in ("halo1", "halo2")}
    result = plan(cluster(), facts)
    assert result.refused == {}
    assert not any("FedoraWorkstation" in c for c in result.commands("halo1"))


def test_no_firewalld_is_reported_and_nothing_is_started(tmp_path, caplog) -> None:
    result = plan_serving("", tmp_path, ["state not running"])
    assert "firewalld is not running: Ray's ports are open" in caplog.text
    assert firewall_ops(result, "halo1") == []


def test_data_link_outside_the_trusted_zone_is_activated_again() -> None:
    moved = converged_node(firewall=firewalld_output(public={"interfaces": "enp194s0np0"}))
    again = plan_both(cluster(), node=moved)
    assert "Data link | Activate halo-data on enp194s0np0" in again.names("halo1")


def test_data_link_in_the_trusted_zone_is_left_alone() -> None:
    again = plan_both(cluster(), node=converged_node())
    assert "Data link | Activate halo-data on enp194s0np0" not in again.names("halo1")

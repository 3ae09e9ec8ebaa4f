"""The firewall role planned on a lab node's firewalld (tests/recorded.py firewalld_output): vLLM's
port let in on the management side only on the head with `listen: all`, closed again otherwise,
Ray's ports never, and the data link back in the trusted zone."""

from __future__ import annotations

from tests.plan.harness import Plan, plan
from tests.plan.nodes import cluster, converged_node, plan_both, serve_cluster, user_node
from tests.recorded import firewalld_output

SERVICE_FILE = "/etc/firewalld/services/halo-vllm.xml"
OPEN_ALL = ", listen: all, api_key_file: key"


def fedora_workstation() -> list[str]:
    """The lab's firewalld with `public` renamed as Fedora Workstation's default zone, which lets
    every port above 1024 in (ports 1025-65535/tcp and /udp)."""
    return firewalld_output(
        {"public": "FedoraWorkstation"},
        FedoraWorkstation={"ports": "1025-65535/udp 1025-65535/tcp"},
    )


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


def test_an_open_management_zone_is_reported_and_left_alone(tmp_path, caplog) -> None:
    result = plan_serving("", tmp_path, fedora_workstation())
    assert "zone FedoraWorkstation (management side) lets Ray's ports in" in caplog.text
    assert "(6379-6385, 10001-10199)" in caplog.text
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

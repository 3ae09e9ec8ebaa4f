"""The data link's flow control and its competing profiles, planned on recorded outputs:
`ethtool -a` of ice ports (flow control off as the port comes, on with a DAC), and the
NetworkManager profiles of a recorded Strix Halo (`nmcli connection show`, pc1)."""

from __future__ import annotations

import logging

import pytest

from tests.plan.harness import plan
from tests.plan.nodes import (
    FLOW_CONTROL,
    KEYFILE,
    LOOPBACK,
    MGMT,
    PAUSE_OFF,
    PAUSE_ON,
    TB,
    cluster,
    converged_node,
    fresh_node,
    plan_both,
)
from tests.recorded import nm_profiles_output

PC1 = "nmcli-connection-show-strix-halo-fedora43-pc1.txt"
APPLY = "Data link | Flow control on enp194s0np0"


def test_the_dispatcher_script_is_root_only_and_for_our_profile_alone() -> None:
    result = plan_both(cluster())
    script = result.uploads("halo1")[FLOW_CONTROL]
    assert script.startswith("#!/bin/sh\n")
    assert '\n[ "$CONNECTION_ID" = halo-data ] || exit 0\n' in script
    (asks,) = [line for line in script.splitlines() if line.startswith("if ! failed=")]
    assert asks == 'if ! failed=$(ethtool -A "$port" rx on tx on 2>&1); then'  # autoneg unsaid
    # NetworkManager runs only root's scripts that no one else may write
    assert any(
        f"chmod 755 {FLOW_CONTROL.replace('/90-', '/.90-')}.halo-new" in c
        for c in result.commands("halo1")
    )


def test_a_fresh_node_gets_flow_control_from_the_activation() -> None:
    names = plan_both(cluster()).names("halo1")
    assert "Data link | Activate halo-data on enp194s0np0" in names
    assert not any(n.startswith(APPLY) for n in names)


def test_pause_found_off_on_an_active_link_is_applied() -> None:
    result = plan_both(cluster(), node=converged_node(pause=PAUSE_OFF))
    (name,) = [n for n in result.names("halo1") if n.startswith(APPLY)]
    assert name == f"{APPLY}: RX off TX off (autoneg on) -> RX on TX on"
    assert f"CONNECTION_ID=halo-data {FLOW_CONTROL} enp194s0np0 up" in result.commands("halo1")
    assert not any(n.startswith("Data link | Activate") for n in result.names("halo1"))


@pytest.mark.parametrize("pause", [PAUSE_ON, None], ids=["already on", "no pause support"])
def test_pause_on_or_unsupported_is_left_alone(pause: str | None) -> None:
    result = plan_both(cluster(), node=converged_node(pause=pause))
    assert not any(n.startswith(APPLY) for n in result.names("halo1"))


def test_thunderbolt_gets_no_flow_control() -> None:
    node = fresh_node(interfaces=[LOOPBACK, MGMT, TB])
    result = plan(cluster(interconnect="thunderbolt", data="{}"), {"halo1": node, "halo2": node})
    assert FLOW_CONTROL not in result.uploads("halo1")
    assert "dispatcher.d" not in result.uploads("halo1")[KEYFILE]


def test_the_recorded_thunderbolt0_profile_is_named_and_left_alone(caplog) -> None:
    node = fresh_node(interfaces=[LOOPBACK, MGMT, TB], profiles=nm_profiles_output(PC1))
    with caplog.at_level(logging.INFO, logger="pyinfra"):
        result = plan(
            cluster(interconnect="thunderbolt", data="{}"), {"halo1": node, "halo2": node}
        )
    said = [r.getMessage() for r in caplog.records if "other profiles" in r.getMessage()]
    assert len(said) == 2 and said[0].endswith(
        "other profiles on thunderbolt0, left as they are: 'thunderbolt0' "
        "(active on thunderbolt0, autoconnect priority 0)"
    )
    assert "\nautoconnect-priority=100\n" in result.uploads("halo1")[KEYFILE]
    # theirs is never changed nor deleted: no nmcli but our activation, no other keyfile
    nmcli = [c for c in result.commands("halo1") if "nmcli" in c]
    assert nmcli == ["nmcli connection reload && nmcli connection up id halo-data"]
    written = [p for p in result.uploads("halo1") if "NetworkManager" in p]
    assert written == [KEYFILE]


def test_a_profile_of_another_port_is_not_named(caplog) -> None:
    profiles = nm_profiles_output(PC1, priority=0)
    with caplog.at_level(logging.INFO, logger="pyinfra"):
        plan_both(cluster(), profiles=profiles)
    assert not [r for r in caplog.records if "other profiles" in r.getMessage()]


def test_an_unbound_profile_that_outranks_ours_is_said_so(caplog) -> None:
    unbound = [
        "profile 0c3a7f0e-1b7e-4d0a-9d7e-2b8f6f1f0a11:802-3-ethernet::Wired\\: any",
        "setting connection.interface-name:",
        "setting connection.autoconnect:yes",
        "setting connection.autoconnect-priority:200",
    ]
    with caplog.at_level(logging.INFO, logger="pyinfra"):
        plan_both(cluster(), profiles=unbound)
    said = [r.getMessage() for r in caplog.records if "other profiles" in r.getMessage()]
    assert len(said) == 1 and said[0].endswith(
        "other profiles on enp194s0np0, left as they are: 'Wired: any' "
        "(any Ethernet port, autoconnect priority 200, not below ours (100))"
    )


def test_the_link_under_another_name_is_bound_and_activated_where_it_is() -> None:
    # a dock's link came first: thunderbolt-net named the host-to-host link thunderbolt1
    link = dict(TB, name="thunderbolt1")
    node = fresh_node(interfaces=[LOOPBACK, MGMT, link])
    result = plan(cluster(interconnect="thunderbolt", data="{}"), {"halo1": node, "halo2": node})
    assert "Data link | Activate halo-data on thunderbolt1" in result.names("halo1")
    assert "\ndriver=thunderbolt-net\n" in result.uploads("halo1")[KEYFILE]
    env = result.uploads("halo1")["/etc/halo-cluster/cluster.env"]
    assert "\nNCCL_SOCKET_IFNAME=thunderbolt1\n" in env


def test_the_labs_veth_named_thunderbolt0_keeps_its_name() -> None:
    veth = {"name": "thunderbolt0", "mac": "02:00:00:00:00:01"}  # no device: driver "-"
    node = fresh_node(interfaces=[LOOPBACK, MGMT, veth])
    result = plan(cluster(interconnect="thunderbolt", data="{}"), {"halo1": node, "halo2": node})
    keyfile = result.uploads("halo1")[KEYFILE]
    assert "interface-name=thunderbolt0\n" in keyfile and "[match]" not in keyfile

"""The NetworkManager profiles that compete for the data port, from the recorded profiles of a
Strix Halo (`nmcli connection show`, pc1 and pc2: ethernet, infiniband and a link-local
thunderbolt0 profile) as the NmProfiles fact reads them."""

from __future__ import annotations

import pytest

from halo_cluster.roles.network.facts import NmProfiles, unescape
from halo_cluster.roles.network.profiles import competing, described
from tests.recorded import nm_profiles_output

PCS = (
    "nmcli-connection-show-strix-halo-fedora43-pc1.txt",
    "nmcli-connection-show-strix-halo-fedora43-pc2.txt",
)


@pytest.mark.parametrize("recorded", PCS)
def test_the_recorded_profiles_are_read_with_their_binding(recorded: str) -> None:
    profiles = NmProfiles().process(nm_profiles_output(recorded))
    assert [(p["name"], p["type"], p["device"]) for p in profiles] == [
        ("Kabelgebundene Verbindung 1", "802-3-ethernet", "eno1"),
        ("ib-conn", "infiniband", "ibp195s0"),
        ("thunderbolt0", "802-3-ethernet", "thunderbolt0"),
    ]
    assert all(p["autoconnect"] and p["priority"] == 0 for p in profiles)


@pytest.mark.parametrize("recorded", PCS)
def test_the_link_local_thunderbolt0_profile_competes_for_thunderbolt0(recorded: str) -> None:
    profiles = NmProfiles().process(nm_profiles_output(recorded))
    found = competing(profiles, "thunderbolt0", "halo-data")
    assert [p["name"] for p in found] == ["thunderbolt0"]
    assert described(found, "thunderbolt0", 100) == (
        "'thunderbolt0' (active on thunderbolt0, autoconnect priority 0)"
    )
    # the management and InfiniBand profiles are another port's
    assert competing(profiles, "enp194s0np0", "halo-data") == []


def test_ours_is_never_counted_and_an_unknown_port_has_none() -> None:
    profiles = NmProfiles().process(nm_profiles_output(PCS[0]))
    assert competing(profiles, "thunderbolt0", "thunderbolt0") == []
    assert competing(profiles, None, "halo-data") == []


def test_bound_inactive_unbound_and_off_profiles() -> None:
    lines = [
        "profile 1:802-3-ethernet::guide",  # the guide's own, bound to the port, not active
        "setting connection.interface-name:enp194s0np0",
        "setting connection.autoconnect:yes",
        "setting connection.autoconnect-priority:999",
        "profile 2:802-3-ethernet::spare\\:one",  # bound to no port (or by MAC)
        "setting connection.interface-name:",
        "setting connection.autoconnect:no",
        "setting connection.autoconnect-priority:0",
        "profile 3:802-3-ethernet::any",
        "setting connection.interface-name:",
        "setting connection.autoconnect:yes",
        "setting connection.autoconnect-priority:-999",
        "profile 4:infiniband::ib",  # bound to nothing, but no Ethernet port takes it
        "setting connection.interface-name:",
    ]
    profiles = NmProfiles().process(lines)
    assert profiles[1]["name"] == "spare:one" and not profiles[1]["autoconnect"]
    found = competing(profiles, "enp194s0np0", "halo-data")
    assert described(found, "enp194s0np0", 100) == (
        "'guide' (bound to enp194s0np0, autoconnect priority 999, not below ours (100)), "
        "'any' (any Ethernet port, autoconnect priority -999)"
    )


def test_terse_escapes() -> None:
    assert unescape("a\\:b\\\\c") == "a:b\\c"
    assert NmProfiles().command().startswith("nmcli -t -f UUID,TYPE,DEVICE,NAME connection show")

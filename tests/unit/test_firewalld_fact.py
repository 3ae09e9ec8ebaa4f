"""The Firewalld fact without firewall-cmd: busctl's D-Bus replies for the runtime view, the zone
files for the permanent one, checked against what firewall-cmd listed on the same lab node, and
its command run here by a real shell against a stand-in busctl."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from halo_cluster.node import firewalld
from halo_cluster.node.firewalldfact import Firewalld
from halo_cluster.node.reads import part_command
from tests.recorded import (
    FIREWALLD_ZONE_FILES,
    busctl_reply,
    firewalld_output,
    fixture,
    listed_zones,
)

USR = firewalld.USR_ZONES
ETC = firewalld.ETC_ZONES


def listed() -> tuple[str, dict]:
    """The recorded `firewall-cmd --list-all-zones` views (nm-shared's one rich rule, `rule
    priority="32767" reject`, among them: the permanent view keeps a rule of an action alone)."""
    return listed_zones(fixture("firewalld-debian13-lab-fresh.txt"))


def test_both_views_are_what_firewall_cmd_listed_on_the_lab_node() -> None:
    """The permanent view parsed from the lab's own zone files (firewalld 2.3.1) is what
    `firewall-cmd --permanent --list-all-zones` printed there; the runtime view is the recorded
    runtime listing through firewalld's a{sv} and busctl's JSON (tests/recorded.py)."""
    default, views = listed()
    state = Firewalld().process(firewalld_output())
    assert state["state"] == "running" and state["default"] == default == "public"
    assert state["runtime"] == views["runtime"]
    assert state["permanent"] == views["permanent"]


def test_the_zone_files_as_grep_prints_them() -> None:
    files = sorted(FIREWALLD_ZONE_FILES.glob("*.xml"))
    printed = subprocess.run(
        ["grep", "-aH", "", *map(str, files)], capture_output=True, text=True, check=True
    ).stdout
    lines = printed.replace(f"{FIREWALLD_ZONE_FILES}/", f"{USR}/").splitlines()
    assert Firewalld().process(["state running", *lines])["permanent"] == listed()[1]["permanent"]


def test_a_change_shows_in_both_views() -> None:
    state = Firewalld().process(firewalld_output(public={"services": "halo-vllm ssh"}))
    assert state["runtime"]["public"]["services"] == ["halo-vllm", "ssh"]
    assert state["permanent"]["public"]["services"] == ["halo-vllm", "ssh"]
    assert state["permanent"]["home"]["services"] == [
        "dhcpv6-client",
        "mdns",
        "samba-client",
        "ssh",
    ]


def zone(body: str, target: str = "") -> str:
    return f'<?xml version="1.0" encoding="utf-8"?>\n<zone{target}>\n{body}\n</zone>\n'


def test_an_etc_zone_file_replaces_firewalld_own() -> None:
    files = {
        f"{USR}/public.xml": zone('<service name="ssh"/>'),
        f"{USR}/work.xml": zone('<service name="ssh"/>'),
        f"{ETC}/public.xml": zone('<service name="halo-vllm"/><service name="ssh"/>'),
        f"{ETC}/work.xml": "<zone><service name=",  # not XML: firewalld keeps its own
        f"{ETC}/lab.xml": zone('<port port="8000" protocol="tcp"/>'),
        f"{ETC}/lab.xml.old": zone('<port port="9000" protocol="tcp"/>'),  # firewalld's backup
        f"{ETC}/split/a.xml": zone('<service name="ssh"/>'),  # combined at runtime
        f"{USR}/split/b.xml": zone('<service name="ssh"/>'),  # only /etc has combined zones
        f"{ETC}/icmp.xml": "<icmptype><short>not a zone</short></icmptype>",
    }
    zones = firewalld.permanent_zones(files)
    assert list(zones) == ["lab", "public", "split/a", "work"]
    assert zones["public"]["services"] == ["halo-vllm", "ssh"]
    assert zones["work"]["services"] == ["ssh"]
    assert zones["lab"]["ports"] == ["8000/tcp"]


def test_a_zone_file_read_as_firewalld_reads_it() -> None:
    text = zone(
        """  <short>Everything</short>
  <interface name="eno1"/>
  <source address="10.0.0.0/8"/>
  <source ipset="admins"/>
  <service name="ssh"/>
  <service name="http"/>
  <service name="ssh"/>
  <port port="8000" protocol="tcp"/>
  <port port="6379:6385" protocol="tcp"/>
  <protocol value="icmp"/>
  <icmp-block name="echo-request"/>
  <icmp-block-inversion/>
  <masquerade/>
  <forward-port port="22" protocol="tcp" to-port="2222"/>
  <source-port port="53" protocol="udp"/>
  <rule family="ipv4">
    <source address="192.168.1.0/24"/>
    <service name="rpc-bind"/>
    <port port="9000" protocol="tcp"/>
    <accept/>
  </rule>
  <rule priority="-10"><reject type="icmp-admin-prohibited"/></rule>
  <rule><drop><limit value="1/m"/></drop></rule>""",
        ' target="DROP" ingress-priority="-5"',
    )
    settings = firewalld.zone_file_settings(text)
    assert settings == {
        "target": ["DROP"],
        # a rich rule's source, service and port are the rule's, not the zone's
        "services": ["http", "ssh"],
        "interfaces": ["eno1"],
        "sources": ["10.0.0.0/8", "ipset:admins"],
        "protocols": ["icmp"],
        "icmp-blocks": ["echo-request"],
        "ports": ["8000/tcp", "6379-6385/tcp"],
        "source-ports": ["53/udp"],
        "forward-ports": ["port=22:proto=tcp:toport=2222:toaddr="],
        # no <forward/>: firewalld reads a zone file without it as forward off
        "forward": ["no"],
        "masquerade": ["yes"],
        "icmp-block-inversion": ["yes"],
        "ingress-priority": ["-5"],
        "egress-priority": ["0"],
        # only a rule of an action alone is kept (the rule with a match and the limited one
        # are not: nothing decides on them), as firewalld prints it
        "rich rules": ['rule priority="-10" reject type="icmp-admin-prohibited"'],
    }


@pytest.mark.parametrize("target", ["", ' target="default"', ' target="{chain}_{zone}"'])
def test_the_default_target(target: str) -> None:
    assert firewalld.zone_file_settings(zone("<forward/>", target))["target"] == ["default"]


def test_a_zone_element_without_its_attribute_is_skipped_as_firewalld_does() -> None:
    assert firewalld.zone_file_settings(zone('<port port="8000"/>')) is None


# busctl 252's --json=short reply to getZoneSettings2, printed by the real busctl from a
# stand-in D-Bus service returning firewalld's out signature a{sv} with these values (firewalld
# leaves out empty lists); not recorded from a live firewalld
EVERYTHING_REPLY = (
    '{"type":"a{sv}","data":[{"target":{"type":"s","data":"DROP"},'
    '"short":{"type":"s","data":"Ünïcode \\\\ \\"quoted\\"\\ttab"},'
    '"ports":{"type":"a(ss)","data":[["8000","tcp"],["1025-65535","udp"]]},'
    '"forward_ports":{"type":"a(ssss)","data":[["22","tcp","2222",""],["80","tcp","","10.0.0.2"]]},'
    '"source_ports":{"type":"a(ss)","data":[["53","udp"]]},'
    '"masquerade":{"type":"b","data":true},"ingress_priority":{"type":"i","data":-5},'
    '"sources":{"type":"as","data":["10.0.0.0/8","ipset:x"]},'
    '"interfaces":{"type":"as","data":["enp194s0np0","eno1"]},'
    '"icmp_blocks":{"type":"as","data":["echo-request"]},'
    '"icmp_block_inversion":{"type":"b","data":true},"forward":{"type":"b","data":false},'
    '"rules_str":{"type":"as","data":["rule priority=\\"32767\\" reject"]}}]}'
)


def test_a_runtime_zone_from_busctl() -> None:
    assert firewalld.runtime_settings(EVERYTHING_REPLY) == {
        "target": ["DROP"],
        "services": [],
        "interfaces": ["eno1", "enp194s0np0"],
        "sources": ["10.0.0.0/8", "ipset:x"],
        "protocols": [],
        "icmp-blocks": ["echo-request"],
        "ports": ["8000/tcp", "1025-65535/udp"],
        "source-ports": ["53/udp"],
        "forward-ports": [
            "port=22:proto=tcp:toport=2222:toaddr=",
            "port=80:proto=tcp:toport=:toaddr=10.0.0.2",
        ],
        "forward": ["no"],
        "masquerade": ["yes"],
        "icmp-block-inversion": ["yes"],
        "ingress-priority": ["-5"],
        "egress-priority": ["0"],
        "rich rules": ['rule priority="32767" reject'],
    }


@pytest.mark.parametrize("state", ["not running", "absent"])
def test_no_firewalld_leaves_both_views_empty(state: str) -> None:
    assert Firewalld().process([f"state {state}"]) == {
        "state": state,
        "default": "",
        "runtime": {},
        "permanent": {},
    }


# the stand-in busctl: answers from files named after the method (and zone), logs its arguments
BUSCTL = """#!/bin/sh
echo "$*" >>"$HERE/calls"
for last; do :; done
case "$*" in
  *" getDefaultZone") cat "$HERE/default" ;;
  *" getZones") cat "$HERE/zones" ;;
  *" getZoneSettings2 s "*) cat "$HERE/zone-$last" ;;
  *) exit 1 ;;
esac
"""


def run_fact(tmp_path: Path, answers: dict[str, str]) -> tuple[int, list[str], list[str]]:
    """The fact's own command run by sh with a stand-in busctl (and firewall-cmd, which it only
    looks for): (status, stdout lines but the zone files of this machine, busctl's calls)."""
    for name, program in (("busctl", BUSCTL), ("firewall-cmd", "#!/bin/sh\nexit 9\n")):
        (tmp_path / name).write_text(program)
        (tmp_path / name).chmod(0o755)
    for name, text in answers.items():
        (tmp_path / name).write_text(text + "\n")
    done = subprocess.run(
        ["/bin/sh", "-c", Firewalld().command()],
        capture_output=True,
        text=True,
        env={"PATH": f"{tmp_path}:/usr/bin:/bin", "HERE": str(tmp_path)},
    )
    calls = tmp_path / "calls"
    lines = [line for line in done.stdout.splitlines() if not line.startswith("/")]
    return done.returncode, lines, calls.read_text().splitlines() if calls.exists() else []


def test_the_command_asks_firewalld_once_per_zone(tmp_path: Path) -> None:
    public = busctl_reply("a{sv}", {"services": {"type": "as", "data": ["ssh"]}})
    trusted = busctl_reply("a{sv}", {"interfaces": {"type": "as", "data": ["enp194s0np0"]}})
    status, lines, calls = run_fact(
        tmp_path,
        {
            "default": busctl_reply("s", "public"),
            "zones": busctl_reply("as", ["public", "trusted"]),
            "zone-public": public,
            "zone-trusted": trusted,
        },
    )
    assert status == 0
    assert lines == [
        "state running",
        'default {"type":"s","data":["public"]}',
        f"runtime public {public}",
        f"runtime trusted {trusted}",
    ]
    call = (
        "--system --auto-start=no --json=short call org.fedoraproject.FirewallD1 "
        "/org/fedoraproject/FirewallD1 org.fedoraproject.FirewallD1"
    )
    assert calls == [
        f"{call} getDefaultZone",
        f"{call}.zone getZones",
        f"{call}.zone getZoneSettings2 s public",
        f"{call}.zone getZoneSettings2 s trusted",
    ]
    state = Firewalld().process(lines)
    assert firewalld.zone_of(state, "enp194s0np0") == "trusted"
    assert firewalld.zones_with_service(state, "ssh", "runtime") == {"public"}


def test_a_stopped_firewalld_is_not_running_and_not_started(tmp_path: Path) -> None:
    status, lines, calls = run_fact(tmp_path, {})
    assert (status, lines, len(calls)) == (0, ["state not running"], 1)


def test_a_zone_gone_between_two_calls_fails_the_read(tmp_path: Path) -> None:
    """firewalld reloaded meanwhile: the read fails, and cached() reads it again on its own."""
    answers = {"default": busctl_reply("s", "public"), "zones": busctl_reply("as", ["gone"])}
    assert run_fact(tmp_path, answers)[0] == 1


def test_no_firewall_cmd_is_absent(tmp_path: Path) -> None:
    done = subprocess.run(
        ["/bin/sh", "-c", Firewalld().command()],
        capture_output=True,
        text=True,
        env={"PATH": str(tmp_path)},
    )
    assert (done.returncode, done.stdout) == (0, "state absent\n")


def test_the_command_is_one_part_of_the_node_read() -> None:
    assert part_command(Firewalld, {}) == Firewalld().command()

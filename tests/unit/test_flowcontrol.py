"""Link-level flow control on the E810: `ethtool -a` parsed from outputs recorded on ice ports,
the Hardware fact that reads it, verify's check on them, and the network role's dispatcher
script really run by dash and bash. The NIC cannot exist here: `ethtool` is a stand-in printing
the recorded output (and, for the lab's veth, failing as a driver without pause support does)."""

from __future__ import annotations

import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest

from halo_cluster.decide import flowcontrol
from halo_cluster.node.facts import hardware_process
from halo_cluster.node.render import templates
from tests.infra.target import Target
from tests.recorded import fixture
from tests.unit.configs import VALID_ROCE, write

ON = "ethtool-a-ice-dac-25g-pause-on.txt"
OFF = "ethtool-a-include-statistics-ice-pause-off.txt"
SHELLS = ("/bin/sh", "/bin/bash")


def test_the_recorded_dac_link_has_flow_control_on_with_autoneg() -> None:
    pause = flowcontrol.parse_pause(fixture(ON))
    assert pause == {
        "Autonegotiate": "on",
        "RX": "on",
        "TX": "on",
        "RX negotiated": "on",
        "TX negotiated": "on",
    }
    assert flowcontrol.applied(pause)


def test_the_recorded_port_as_it_comes_is_off_and_its_counters_are_left_out() -> None:
    pause = flowcontrol.parse_pause(fixture(OFF))
    assert pause["RX"] == pause["TX"] == "off" and pause["Autonegotiate"] == "on"
    assert "tx_pause_frames" not in str(pause) and not flowcontrol.applied(pause)
    assert flowcontrol.describe(pause) == "RX off TX off (autoneg on)"


def test_no_pause_support_is_nothing() -> None:
    assert flowcontrol.parse_pause("") == {}
    assert not flowcontrol.applied({})


def test_the_hardware_fact_reads_the_ports_pause() -> None:
    lines = ["virt none", *[f"pause {line}" for line in fixture(OFF).splitlines()]]
    found = hardware_process([*lines, "module ice"])
    assert found["pause"] == flowcontrol.parse_pause(fixture(OFF))
    assert found["modules"] == ["ice"]


def target(tmp_path: Path, pause: str, rc: int = 0, virt: str = "none") -> Target:
    """halo1 of a RoCE cluster whose data port answers `ethtool -a` with `pause`."""
    from halo_cluster.config.loader import load_cluster

    cluster = load_cluster(write(tmp_path, VALID_ROCE))
    node = Target(cluster, cluster.nodes[0], None)
    node.__dict__.update(interface="enp1s0f0np0", container=None if virt == "none" else virt)
    node._read[node.pause_command] = SimpleNamespace(stdout=pause, stderr="", rc=rc)
    return node


def test_verify_passes_on_the_recorded_dac_link(tmp_path: Path) -> None:
    node = target(tmp_path, fixture(ON))
    assert node.flow_control_problem() is None
    assert flowcontrol.describe(node.pause) == "RX on TX on (autoneg on)"


def test_verify_fails_on_the_recorded_port_as_it_comes(tmp_path: Path) -> None:
    assert target(tmp_path, fixture(OFF)).flow_control_problem() == (
        "halo1: flow control RX off TX off (autoneg on) on enp1s0f0np0, expected RX on TX on: "
        "see `journalctl -t halo-flow-control`, then re-run the deploy"
    )


def test_verify_fails_on_a_port_without_pause_parameters(tmp_path: Path) -> None:
    node = target(tmp_path, "", rc=1)
    node._read[node.pause_command].stderr = "netlink error: Operation not supported"
    assert node.flow_control_problem() == (
        "halo1: `ethtool -a enp1s0f0np0` reports no pause parameters (netlink error: Operation "
        "not supported): is enp1s0f0np0 on ice?"
    )


def test_verify_says_not_verified_in_a_container(tmp_path: Path) -> None:
    with pytest.raises(pytest.skip.Exception, match="NOT VERIFIED: flow control"):
        target(tmp_path, "", virt="docker").not_verified("flow control")


# the dispatcher script


def stand_ins(tmp_path: Path, pause: str | None, sets: int = 0) -> Path:
    """A PATH folder with `ethtool` (`-a` prints `pause`, or fails as on a veth when None; `-A`
    exits `sets`) and `logger`, each recording its arguments in calls.txt."""
    folder = tmp_path / "bin"
    folder.mkdir()
    (tmp_path / "pause.txt").write_text(pause or "")
    calls = tmp_path / "calls.txt"
    shows = f"cat {tmp_path / 'pause.txt'}"
    if pause is None:
        shows = "echo 'netlink error: Operation not supported' >&2; exit 1"
    (folder / "ethtool").write_text(
        f'#!/bin/sh\necho "ethtool $*" >> {calls}\n'
        f'if [ "$1" = -a ]; then {shows}; else exit {sets}; fi\n'
    )
    (folder / "logger").write_text(f'#!/bin/sh\necho "logger $*" >> {calls}\n')
    for tool in folder.iterdir():
        tool.chmod(0o755)
    return folder


def dispatch(
    tmp_path: Path,
    shell: str,
    pause: str | None,
    sets: int = 0,
    *args: str,
    env: dict | None = None,
) -> tuple[subprocess.CompletedProcess, list[str]]:
    script = tmp_path / "90-halo-flow-control.sh"
    script.write_text(templates("roles.network")("halo-flow-control.sh.j2", connection="halo-data"))
    folder = stand_ins(tmp_path, pause, sets)
    done = subprocess.run(
        [shell, str(script), *(args or ("enp194s0np0", "up"))],
        capture_output=True,
        text=True,
        timeout=10,
        env={"PATH": f"{folder}:/usr/bin:/bin", "CONNECTION_ID": "halo-data", **(env or {})},
    )
    calls = tmp_path / "calls.txt"
    return done, calls.read_text().splitlines() if calls.exists() else []


@pytest.mark.parametrize("shell", SHELLS)
def test_the_script_asks_rx_and_tx_only_when_off(tmp_path: Path, shell: str) -> None:
    done, calls = dispatch(tmp_path, shell, fixture(OFF))
    assert done.returncode == 0, done.stderr
    assert calls[:2] == ["ethtool -a enp194s0np0", "ethtool -A enp194s0np0 rx on tx on"]
    assert calls[2].startswith("logger -t halo-flow-control -- enp194s0np0: flow control on")
    assert done.stdout.startswith("enp194s0np0: flow control on")


@pytest.mark.parametrize("shell", SHELLS)
def test_the_script_leaves_a_link_already_on(tmp_path: Path, shell: str) -> None:
    done, calls = dispatch(tmp_path, shell, fixture(ON))
    assert (done.returncode, calls, done.stdout) == (0, ["ethtool -a enp194s0np0"], "")


@pytest.mark.parametrize("shell", SHELLS)
def test_the_script_tolerates_a_port_without_pause_and_says_so(tmp_path: Path, shell: str):
    done, calls = dispatch(tmp_path, shell, None)
    assert done.returncode == 0 and len(calls) == 2
    assert done.stdout == (
        "enp194s0np0: no pause support (netlink error: Operation not supported): "
        "flow control left as it is\n"
    )


@pytest.mark.parametrize("shell", SHELLS)
def test_a_refused_request_fails_the_script(tmp_path: Path, shell: str) -> None:
    done, calls = dispatch(tmp_path, shell, fixture(OFF), 1)
    assert done.returncode == 1 and "ethtool -A rx on tx on failed" in done.stdout
    assert calls[-1].startswith("logger -t halo-flow-control -- enp194s0np0: ethtool -A")


@pytest.mark.parametrize(
    ("args", "env"),
    [(("enp194s0np0", "down"), None), (("eno1", "up"), {"CONNECTION_ID": "Wired connection 1"})],
    ids=["another action", "another profile"],
)
def test_the_script_acts_only_on_our_profile_coming_up(tmp_path: Path, args, env) -> None:
    done, calls = dispatch(tmp_path, "/bin/sh", fixture(OFF), 0, *args, env=env)
    assert (done.returncode, calls) == (0, [])

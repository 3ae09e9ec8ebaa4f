"""The new user's path, as the README walks it, with the wheel in a venv of its own: in a folder
outside the checkout, `halo-cluster init` for the lab's management addresses, the edit the
README asks for, `deploy --yes`, `verify`, `status --json`; then one node's sshd stopped: each
command that reaches nodes says one line naming the node and SSH's reason and exits with its
documented code (halo_cluster/tools/commands/exits.py, docs/ci.md); `status` reads each node's
reach, image and versions with serving off, and runs on the same config with serving on too
(never deployed). On the
shared converged 2-node lab, with the lab's names and data interface, so that the next test finds
it as it was."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from halo_cluster.tools.commands.exits import DOWN, ERROR, OK
from lab import cli, network
from tests.e2e.conftest import ROOT, Lab
from tests.unit.helpers_package import Installed, install

DOWN_NODE = "node2"  # the worker: the head's own reads still answer
# the config as a serving cluster's, for `status` alone (it reads no node when serving is off);
# never deployed: the lab stays converged, not serving
SERVING = "serving.yml"
SERVE = "serve:\n  enabled: true\n  model: facebook/opt-125m\n"
# with DOWN_NODE's sshd stopped: the exit code, and how many lines name it with ssh's reason;
# `where` asks no node (its answer is the config's); `status` with serving off still reads each
WITH_A_NODE_DOWN = {
    "status": (ERROR, 1),
    f"status --config {SERVING}": (ERROR, 1),
    "verify": (ERROR, 1),
    "drift": (ERROR, 1),
    "where": (OK, 0),
    "deploy --dry": (ERROR, 1),
}
STATE = ".halo-cluster"  # the tool's folder beside the config (docs/architecture.md)


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    return install(tmp_path_factory.mktemp("wheel"))


def edited(config: str, lab: Lab) -> str:
    """The README's `$EDITOR cluster.yml` step: the lab's node names (the data link's connection
    is keyed by them), its data interface (the lab has no E810 for `auto` to find) and the
    known_hosts that pins its host keys."""
    for number, name in enumerate(lab.nodes, 1):
        config = config.replace(f"name: halo{number}", f"name: {name}")
    interface = network.DATA_INTERFACE[lab.link]
    config = config.replace("data: {interface: auto}", f"data: {{interface: {interface}}}")
    key = f'  key: "{cli.KEY}"\n'
    assert key in config, config
    return config.replace(key, f'{key}  known_hosts: "{cli.KNOWN_HOSTS}"\n')


def leader(name: str) -> str:
    """The node's systemd (PID 1 of its container): systemd-nspawn's child."""
    nspawn = cli.node_dirs(name).nspawn_pid.read_text().strip()
    children = Path(f"/proc/{nspawn}/task/{nspawn}/children").read_text().split()
    (init,) = [p for p in children if Path(f"/proc/{p}/comm").read_text().strip() == "systemd"]
    return init


def on_node(name: str, *argv: str) -> None:
    """ARGV in the node's namespaces, from this machine: it works with the node's sshd stopped."""
    namespaces = ["-m", "-u", "-i", "-n", "-p"]
    subprocess.run(["nsenter", "-t", leader(name), *namespaces, *argv], check=True, timeout=60)


@pytest.fixture
def sshd_stopped(converged: Lab) -> Iterator[Lab]:
    """DOWN_NODE's sshd stopped and its open SSH connections closed (the tool's shared ones
    too): a connection to it is refused. Started again after the test."""
    namespace = network.netns(DOWN_NODE)
    kill = ["ip", "netns", "exec", namespace, "ss", "-K", "state", "established", "sport = :22"]
    try:
        on_node(DOWN_NODE, "systemctl", "stop", "sshd.service")
        subprocess.run(kill, check=True, capture_output=True, timeout=30)
        yield converged
    finally:
        on_node(DOWN_NODE, "systemctl", "start", "sshd.service")
        cli.close_shared_connections()
        assert converged.ssh(DOWN_NODE, "true") == ""


@pytest.fixture(scope="module")
def mine(installed: Installed, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder outside the checkout with the cluster.yml `init` wrote for the lab's nodes, as
    the README then has the user edit it."""
    lab = Lab(2, "roce").ensure_up()
    folder = tmp_path_factory.mktemp("my-cluster")
    assert not folder.is_relative_to(ROOT)
    state = cli.load_state()
    addresses = [cli.node_address(state, name) for name in lab.nodes]
    key = ("--ssh-key", str(cli.KEY))
    init = installed.run(installed.command, "init", *addresses, *key, cwd=folder)
    assert init.returncode == OK, init.stdout + init.stderr
    config = folder / "cluster.yml"
    config.write_text(edited(config.read_text(), lab))
    return folder


def test_a_new_user_deploys_verifies_and_reads_the_status(
    installed: Installed, converged: Lab, mine: Path
) -> None:
    deploy = installed.run(installed.command, "deploy", "--yes", cwd=mine)
    assert deploy.returncode == OK, deploy.stdout[-3000:] + deploy.stderr[-3000:]
    verify = installed.run(installed.command, "verify", cwd=mine)
    assert verify.returncode == OK, verify.stdout[-3000:] + verify.stderr[-3000:]
    status = installed.run(installed.command, "status", "--json", cwd=mine)
    assert status.returncode == DOWN, status.stderr  # the lab converged, not serving
    assert isinstance(json.loads(status.stdout), dict), status.stdout
    assert {p.name for p in mine.iterdir()} == {"cluster.yml", STATE}
    assert any((mine / STATE).rglob("verify.xml")), sorted((mine / STATE).rglob("*"))


def test_each_command_says_a_node_down_in_one_line(
    installed: Installed, sshd_stopped: Lab, mine: Path
) -> None:
    (mine / SERVING).write_text((mine / "cluster.yml").read_text() + SERVE)
    wrong = []
    for command, (code, lines) in WITH_A_NODE_DOWN.items():
        result = installed.run(installed.command, *command.split(), cwd=mine)
        said = result.stdout + result.stderr
        about = [line for line in said.splitlines() if DOWN_NODE in line and "refused" in line]
        if result.returncode != code or len(about) != lines or "Traceback" in said:
            wrong.append(f"{command}: exit {result.returncode} (documented {code}):\n{said}")
    assert not wrong, "\n\n".join(wrong)
    status = installed.run(installed.command, "status", "--json", "--config", SERVING, cwd=mine)
    assert status.returncode == ERROR and "unknown" in status.stdout, status.stdout
    assert isinstance(json.loads(status.stdout), dict), status.stdout
    assert {p.name for p in mine.iterdir()} == {"cluster.yml", SERVING, STATE}

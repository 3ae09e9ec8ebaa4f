"""A down node said once (issue 35, item 4): every command that reaches nodes, run as the user runs
it against a config whose two nodes refuse connections (a closed loopback port), says each node
in one line naming it and "refused", exits with its documented code (commands/exits.py, checked
against docs/ci.md elsewhere), prints no traceback and ends within 15 s; `--json` says what it
could not read as "unknown" and is JSON even when serving is off."""

from __future__ import annotations

import json
import os
import socket
import subprocess
from pathlib import Path

import pytest

from halo_cluster.config import lock as locks
from halo_cluster.tools import project
from halo_cluster.tools.commands import exits
from tests.unit.helpers_down import BOUND, NODES, config_text, run

DIGEST = "sha256:" + "a" * 64


def closed_port() -> int:
    """A loopback port nothing listens on: a connection to it is refused at once."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """cluster.yml with a real key (pyinfra refuses a file that is not one) and a lock with a
    previous build (the upgrade and the rollback read it before any node)."""
    found = tmp_path_factory.mktemp("down")
    (found / "ssh").mkdir()
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(found / "ssh" / "id_ed25519")],
        check=True,
    )
    (found / "ssh" / "known_hosts").write_text("")
    port = closed_port()
    (found / "cluster.yml").write_text(config_text(port))
    (found / "off.yml").write_text(config_text(port, serving=False))
    cluster = project.load(found / "cluster.yml")
    previous = locks.Build("sha256:" + "b" * 64, "", "", "", "")  # for rollback to go back to
    lock = locks.Lock(
        head="node1", reference=cluster.container.reference, digest=DIGEST, previous=previous
    )
    locks.write(Path(cluster.container.lock), lock)
    return found


# verify and bench with --json: their lines on stderr, one JSON document on stdout
COMMANDS = {
    "status": (["status"], exits.ERROR),
    "drift": (["drift", "--json-out", os.devnull], exits.ERROR),
    "verify": (["verify", "--json"], exits.ERROR),
    "bench": (["bench", "--json"], exits.ERROR),
    "deploy": (["deploy", "--yes"], exits.ERROR),
    "upgrade": (["upgrade", "--no-bench", "--json"], exits.ERROR),
    "rollback": (["rollback"], exits.ERROR),
    "upgrade --os": (["upgrade", "--os", "--kernel", "6.18.9-200.fc43"], exits.ERROR),
}


@pytest.mark.parametrize("name", COMMANDS)
def test_each_command_says_a_down_node_in_one_line(folder: Path, name: str) -> None:
    argv, code = COMMANDS[name]
    found, out, err, seconds = run(folder, *argv)
    text = err if "--json" in argv else out + err
    assert "Traceback" not in out + err, (out + err)[-3000:]
    assert found == code, text[-3000:]
    if "--json" in argv:
        json_unknown(out, code, unknown=name != "upgrade")
    said = {
        node: [line for line in text.splitlines() if node in line and "refused" in line]
        for node in NODES
    }
    # upgrade --os stops at the first node it cannot read, before touching any
    nodes = ["node1"] if name == "upgrade --os" else list(NODES)
    for node in nodes:
        assert len(said[node]) == 1, (node, text[-3000:])
    assert seconds < BOUND, f"{name}: {seconds:.1f} s"


def test_status_json_says_unknown_for_a_node_it_cannot_reach(folder: Path) -> None:
    code, out, _, _ = run(folder, "status", "--json")
    assert code == exits.ERROR
    found = json.loads(out)
    assert found["exit_code"] == exits.ERROR
    for node in found["nodes"]:
        assert node["reachable"] is False
        assert "refused" in node["unreachable"]
        for key in ("ray", "gpus", "units", "vllm", "memory", "versions", "images"):
            assert node[key] == "unknown", (key, node)


def test_status_json_is_json_when_serving_is_off(folder: Path) -> None:
    code, out, _, _ = run(folder, "status", "--json", config="off.yml")
    assert code == exits.DOWN
    found = json.loads(out)
    assert found["serving"] is False and found["exit_code"] == exits.DOWN


def json_unknown(out: str, code: int, unknown: bool = True) -> None:
    """OUT is one JSON document (the whole of stdout) with exit CODE, saying the down nodes'
    reason and what it could not read as "unknown" (UNKNOWN: the command read something it
    could only not know), never "absent"."""
    found = json.loads(out)
    assert found["exit_code"] == code
    text = json.dumps(found)
    assert "refused" in text
    assert '"unknown"' in text or not unknown
    assert '"absent"' not in text


def test_drift_json_is_one_document_with_the_down_nodes_unknown(folder: Path) -> None:
    code, out, err, _ = run(folder, "drift", "--json", "--json-out", os.devnull)
    assert code == exits.ERROR, err[-2000:]
    json_unknown(out, code)


def test_where_json_is_one_document_from_the_config_alone(folder: Path) -> None:
    code, out, _, _ = run(folder, "where", "--json")
    assert code == exits.OK
    found = json.loads(out)
    assert found["serving"] is True and found["head"] == "node1"
    code, out, _, _ = run(folder, "where", "--json", config="off.yml")
    assert code == exits.OK and json.loads(out)["serving"] is False

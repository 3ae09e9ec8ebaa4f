"""A down node said once (issue 35, item 4): every command that reaches nodes, run as the user runs
it against a config whose two nodes refuse connections (a closed loopback port), says each node
in one line naming it and "refused", exits with its documented code (commands/exits.py, checked
against docs/ci.md elsewhere), prints no traceback and ends within 15 s; `--json` is one
document as commands/documents.py declares it (what it could not read null), also when serving
is off and on a missing or bad config (issue 45 item 10)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
from pathlib import Path

import pytest

from halo_cluster.config import lock as locks
from halo_cluster.tools import jsonout, project
from halo_cluster.tools.commands import documents, exits
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
        json_document(argv[0], out, code)
    said = {
        node: [line for line in text.splitlines() if node in line and "refused" in line]
        for node in NODES
    }
    # upgrade --os stops at the first node it cannot read, before touching any
    nodes = ["node1"] if name == "upgrade --os" else list(NODES)
    for node in nodes:
        assert len(said[node]) == 1, (node, text[-3000:])
    assert seconds < BOUND, f"{name}: {seconds:.1f} s"


def test_status_json_says_null_for_what_it_could_not_read(folder: Path) -> None:
    code, out, _, _ = run(folder, "status", "--json")
    assert code == exits.ERROR
    found = json.loads(out)
    assert found["exit_code"] == exits.ERROR
    for node in found["nodes"]:
        assert node["reachable"] is False
        assert "refused" in node["unreachable"]
        assert node["ray"] == "unknown"  # a word among Ray's words
        for key in ("gpus", "units", "vllm", "memory", "versions", "images"):
            assert node[key] is None, (key, node)


def test_status_with_serving_off_still_reads_each_node(folder: Path) -> None:
    """Serving off, status still reaches every node for its reach, image and versions: down
    nodes are said, and the exit is a node not reached, not serving's 2 (issue 45 item 14)."""
    code, out, err, _ = run(folder, "status", "--json", config="off.yml")
    assert code == exits.ERROR, err
    found = json.loads(out)
    assert found["serving"] is False and found["exit_code"] == exits.ERROR
    assert "serve.enabled is false" in found["reason"]
    assert [(n["name"], n["reachable"]) for n in found["nodes"]] == [(n, False) for n in NODES]
    json_document("status", out, code)
    code, out, err, _ = run(folder, "status", config="off.yml")
    assert code == exits.ERROR and "serve.enabled is false" in out, out + err
    assert all(f"{name} (127.0.0." in out and "refused" in out for name in NODES), out


def json_document(command: str, out: str, code: int) -> None:
    """OUT is one JSON document (the whole of stdout) of COMMAND with exit CODE, every field as
    documents.py declares it, saying the down nodes' reason, never "absent"."""
    found = json.loads(out)
    assert found["exit_code"] == code and found["command"] == command
    assert documents.problems(command, found) == [], found
    text = json.dumps(found)
    assert "refused" in text
    assert '"absent"' not in text


def test_drift_json_is_one_document_with_the_down_nodes_null(folder: Path) -> None:
    code, out, err, _ = run(folder, "drift", "--json", "--json-out", os.devnull)
    assert code == exits.ERROR, err[-2000:]
    json_document("drift", out, code)
    assert all(n["changes"] is None for n in json.loads(out)["nodes"].values())
    code, out, err, _ = run(folder, "drift", "--json-out", os.devnull)
    # every node in error: no "others listed above" (issue 45 item 14)
    assert out.splitlines()[-1] == "drift: error on 2 node(s)", out + err


JSON_COMMANDS = {  # each command with --json, and its code for a bad config
    "status": (["status"], exits.BAD_CONFIG),
    "where": (["where"], exits.BAD_CONFIG),
    "verify": (["verify"], exits.BAD_CONFIG),
    "bench": (["bench"], exits.BAD_CONFIG),
    "drift": (["drift", "--json-out", os.devnull], exits.BAD_CONFIG),
    "upgrade": (["upgrade", "--no-bench"], exits.BAD_CONFIG),
}


@pytest.mark.parametrize("name", JSON_COMMANDS)
def test_json_is_one_document_on_a_missing_or_bad_config(folder: Path, name: str) -> None:
    """A config that is not there, or one the loader refuses: stdout is still one document,
    saying why in `error` (issue 45 item 10)."""
    (folder / "bad.yml").write_text("nodes: []\nbogus_key: 1\n")
    argv, code = JSON_COMMANDS[name]
    for config, said in (("missing.yml", "cannot read"), ("bad.yml", "bogus_key")):
        found, out, err, _ = run(folder, *argv, "--json", config=config)
        assert found == code, out + err
        document = json.loads(out)
        assert (document["command"], document["exit_code"]) == (name, code)
        assert said in document["error"], document
        assert documents.problems(name, document) == [], document
        assert "Traceback" not in err


def test_json_is_one_document_on_a_usage_error(folder: Path) -> None:
    found, out, _, _ = run(folder, "status", "--json", "--bogus")
    document = json.loads(out)
    assert found == document["exit_code"] == exits.ERROR
    assert "'--bogus': unknown argument" in document["error"]
    assert documents.problems("status", document) == []


def test_verify_json_with_serving_off_is_one_document(folder: Path) -> None:
    """The serving checks left out are said on stderr, not before the document (the issue's
    `| jq` failure on init's own config)."""
    found, out, err, _ = run(folder, "verify", "--json", config="off.yml")
    document = json.loads(out)
    assert "serving checks left out" in err and found == document["exit_code"] == exits.ERROR
    assert documents.problems("verify", document) == [], document
    assert document["counts"]["FAILED"] == len(NODES)  # each node's `reached` check


def test_verify_junit_says_the_nodes_that_failed(folder: Path) -> None:
    """Every node down: the JUnit report counts each one's `reached` check failed, not
    tests="0" failures="0" (issue 45 item 14)."""
    found, _, err, _ = run(folder, "verify")
    assert found == exits.ERROR, err
    report = (folder / ".halo-cluster" / "reports" / "verify.xml").read_text()
    assert 'failures="2"' in report and 'tests="2"' in report, report[:600]
    assert report.count('name="test_reached[') == len(NODES)


def test_where_json_is_one_document_from_the_config_alone(folder: Path) -> None:
    code, out, _, _ = run(folder, "where", "--json")
    assert code == exits.OK
    found = json.loads(out)
    assert found["serving"] is True and found["head"] == "node1"
    code, out, _, _ = run(folder, "where", "--json", config="off.yml")
    assert code == exits.OK and json.loads(out)["serving"] is False


def test_verify_document_of_a_node_reached_is_as_documented(folder: Path) -> None:
    """A node reached has its checks' counts, one not reached null (not "unknown")."""
    from tests.infra.conftest import Summary

    found = Summary()
    found.unreachable = {"node2": "node2 (127.0.0.2:22): cannot be reached: refused"}
    found.reports = [
        pytest.TestReport(
            f"tests/infra/test_node.py::test_reached[{name}]",
            ("t", 0, "t"),
            {},
            outcome,
            None,
            "call",
            [],
        )
        for name, outcome in (("node1", "passed"), ("node2", "failed"))
    ]
    document = jsonout.whole("verify", found.document(project.load(folder / "cluster.yml")))
    assert documents.problems("verify", document) == [], document
    assert document["nodes"]["node1"]["checks"] == {
        "passed": 1,
        "FAILED": 0,
        "NOT VERIFIED": 0,
        "WARN": 0,
    }
    assert document["nodes"]["node2"]["checks"] is None

"""The cluster's members in the lock (issue 25, item 3): loading cluster.yml moves a removed
node to the lock's `left` and rotates the tool's Ray token once, a node added again leaves
`left`; a token file the user gave is never rewritten. And the head's probe of a departed node,
read from its exit status."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from halo_cluster.config import lock as locks
from halo_cluster.config.loader import load_cluster
from halo_cluster.roles.serve.facts import DepartedServices
from tests.recorded import skopeo_digest

NAME = "docker.io/kyuz0/vllm-therock-gfx1151"
SERVE = "serve: {enabled: true, model: Qwen/Qwen3-14B}\n"


def config(folder: Path, nodes: int, extra: str = "") -> Path:
    lines = ["cluster_user: vllm", "subnet: 192.168.100.0/29", SERVE + extra + "nodes:"]
    lines += [
        f"  - {{name: halo{i}, ssh: {{host: 10.0.0.1{i}}}, data: {{interface: auto}}}}"
        for i in range(1, nodes + 1)
    ]
    path = folder / "cluster.yml"
    path.write_text("\n".join(lines) + "\n")
    return path


def three_node_lock(folder: Path) -> Path:
    """The lock as a 3-node cluster's first deploy recorded it."""
    members = tuple(locks.Member(f"halo{i}", f"192.168.100.{i}") for i in (1, 2, 3))
    path = folder / locks.LOCK_FILE
    locks.write(path, locks.Lock("halo1", f"{NAME}:latest", skopeo_digest(), members=members))
    return path


def lock_nodes(path: Path, key: str) -> list[str]:
    return [node["name"] for node in json.loads(path.read_text())[key]]


def token(folder: Path) -> str:
    return (folder / ".halo-cluster" / "ray-token").read_text()


def test_a_removed_node_moves_to_left_and_the_token_rotates_once(tmp_path: Path) -> None:
    lock = three_node_lock(tmp_path)
    load_cluster(config(tmp_path, 3))  # the tool's token made, nothing moved
    made = token(tmp_path)
    assert (lock_nodes(lock, "members"), lock_nodes(lock, "left")) == (
        ["halo1", "halo2", "halo3"],
        [],
    )
    assert token(tmp_path) == made
    removed = load_cluster(config(tmp_path, 2))
    assert removed.container.left == {"halo3": "192.168.100.3"}
    assert removed.container.leaving == ("halo3",) and removed.serve.ray_token_owned
    assert (lock_nodes(lock, "members"), lock_nodes(lock, "left")) == (
        ["halo1", "halo2"],
        ["halo3"],
    )
    assert json.loads(lock.read_text())["left"][0]["data_address"] == "192.168.100.3"
    rotated = token(tmp_path)
    assert rotated != made and len(rotated.strip()) == 64
    assert (tmp_path / ".halo-cluster" / "ray-token").stat().st_mode & 0o777 == 0o600
    again = load_cluster(config(tmp_path, 2))  # drift, status, the next deploy: no new token
    assert again.container.left == {"halo3": "192.168.100.3"} and again.container.leaving == ()
    assert token(tmp_path) == rotated
    back = load_cluster(config(tmp_path, 3))
    assert back.container.left == {}
    assert lock_nodes(lock, "left") == [] and lock_nodes(lock, "members")[-1] == "halo3"
    assert token(tmp_path) == rotated
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".halo-cluster.")] == []


def test_a_token_file_the_user_gave_is_never_rewritten(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    three_node_lock(tmp_path)
    given = tmp_path / "my-ray-token"
    given.write_text("a" * 64 + "\n")
    given.chmod(0o600)
    path = config(tmp_path, 2)
    path.write_text(
        path.read_text().replace("Qwen3-14B}", "Qwen3-14B, ray_token_file: my-ray-token}")
    )
    cluster = load_cluster(path)
    assert not cluster.serve.ray_token_owned and cluster.container.leaving == ("halo3",)
    assert given.read_text() == "a" * 64 + "\n"
    assert not (tmp_path / ".halo-cluster").exists()  # no token of the tool's made either
    warned = capsys.readouterr().err
    assert f"serve.ray_token_file: warning: halo3 left the cluster: {given} is yours" in warned


def test_a_new_node_on_a_departed_ones_address_is_a_member_not_departed() -> None:
    members = tuple(locks.Member(n, a) for n, a in (("a", "10.0.0.1"), ("b", "10.0.0.2")))
    lock = locks.Lock("a", "x", "sha256:" + "0" * 64, members=members)
    left, leaving = locks.moved(lock, (locks.Member("a", "10.0.0.1"),))
    assert [d.name for d in left] == ["b"] and leaving == ["b"]
    departed = locks.Lock("a", "x", "sha256:" + "0" * 64, members=members[:1], left=left)
    assert locks.moved(departed, (*members[:1], locks.Member("c", "10.0.0.2"))) == ((), [])


def test_members_malformed_is_one_line(tmp_path: Path) -> None:
    path = three_node_lock(tmp_path)
    doc = json.loads(path.read_text())
    doc["left"] = [{"name": "halo3"}]
    path.write_text(json.dumps(doc))
    assert locks.read(path) == (None, [f"{path}: left: is not a list of {{name, data_address}}"])


def test_a_lock_without_members_reads_as_none_recorded(tmp_path: Path) -> None:
    path = three_node_lock(tmp_path)
    doc = json.loads(path.read_text())
    del doc["members"], doc["left"]
    path.write_text(json.dumps(doc))
    found, problems = locks.read(path)
    assert problems == [] and found is not None and (found.members, found.left) == ((), ())


def test_the_probe_of_departed_nodes_by_exit_status() -> None:
    fact = DepartedServices()
    output = ["192.168.100.3 0", "192.168.100.4 2", "192.168.100.5 255"]
    assert fact.process(output) == {
        "192.168.100.3": "present",
        "192.168.100.4": "absent",
        "192.168.100.5": "unreachable",
    }
    assert fact.process([]) == {}  # no cluster user yet: every address counts as unreachable
    command = fact.command("vllm", ("192.168.100.3", "192.168.100.4"))
    assert command.startswith("id -u vllm >/dev/null 2>&1 || exit 0; ")
    for address in ("192.168.100.3", "192.168.100.4"):
        assert (
            "ssh -n -o BatchMode=yes -o ConnectTimeout=5 -o StrictHostKeyChecking=yes "
            f"vllm@{address} 'ls ~/.config/containers/systemd/halo-*.container' "
            f">/dev/null 2>&1; echo {address} $?"
        ) in command

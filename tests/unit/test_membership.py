"""The cluster's members in the lock (issue 25, item 3; issue 34, item 2): loading cluster.yml
derives a removed node's departure and writes nothing (the deploy records it and rotates the
tool's Ray token: tests/plan/test_membership.py), a node added again leaves `left`; a token
file the user gave is never rewritten. And the head's probe of a departed node, read from its
exit status."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from halo_cluster.config import lock as locks
from halo_cluster.config.loader import load_cluster
from halo_cluster.roles.serve.facts import DepartedServices
from halo_cluster.tools import cli, drift
from tests.recorded import skopeo_digest

GUARD = f".{locks.LOCK_FILE}.flock"  # the writers' file lock, which the test's own write made

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


def test_loading_a_config_a_node_left_writes_nothing(tmp_path: Path) -> None:
    """Loading is what `where`, `drift`, `status`, `verify` and `bench` do: the departure is
    derived (the head probes the node, the next deploy records it and rotates the token) but
    neither the lock nor a token is written (tests/plan/test_membership.py: the deploy)."""
    lock = three_node_lock(tmp_path)
    before = (lock.read_bytes(), lock.stat().st_mtime_ns)
    same = load_cluster(config(tmp_path, 3)).container
    assert (same.leaving, same.unrecorded, same.left) == ((), False, {})
    removed = load_cluster(config(tmp_path, 2))
    assert removed.container.left == {"halo3": "192.168.100.3"}
    assert removed.container.leaving == ("halo3",) and removed.container.unrecorded
    assert removed.serve.ray_token_owned
    assert (lock.read_bytes(), lock.stat().st_mtime_ns) == before
    assert not (tmp_path / ".halo-cluster").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == [GUARD, "cluster.yml", locks.LOCK_FILE]


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
    assert locks.read(path) == (
        None,
        [f"{path}: left[0].data_address: missing", f"{path}: left[0].since: missing"],
    )


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


def test_where_and_drift_write_neither_the_lock_nor_a_token_and_say_what_is_next(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    """Issue 34, item 2: `where` and `drift` load the config of a cluster a node left; the
    lock keeps its bytes and its time, no Ray token is made, and each says in one line what the
    next deploy records."""
    lock = three_node_lock(tmp_path)
    path = config(tmp_path, 2)
    before = (lock.read_bytes(), lock.stat().st_mtime_ns)
    said = (
        "halo-cluster.lock: halo3 left the config: the next deploy records it and rotates Ray's "
        "token"
    )
    monkeypatch.setenv("CLUSTER_CONFIG", str(path))
    assert cli.main(["where"]) == 0
    assert capsys.readouterr().out.splitlines()[0] == said

    def dry_run(*args) -> subprocess.CompletedProcess:  # pyinfra's plan: no node planned
        return subprocess.CompletedProcess([], 1, stdout="", stderr="")

    monkeypatch.setattr(drift, "dry_run", dry_run)
    assert drift.main(["--json-out", os.devnull], tmp_path) == drift.ERROR
    assert capsys.readouterr().out.splitlines()[0] == said
    assert (lock.read_bytes(), lock.stat().st_mtime_ns) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == [GUARD, "cluster.yml", locks.LOCK_FILE]


def test_bench_and_verify_say_what_the_next_deploy_records_and_write_no_lock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    """Issue 34, item 2: like where, drift and status, on stderr (bench's stdout may be its
    --json document; verify says it before its checks run)."""
    import pytest as checks

    from halo_cluster.tools import project
    from halo_cluster.tools.bench import run, view
    from halo_cluster.tools.commands import verify

    lock = three_node_lock(tmp_path)
    before = (lock.read_bytes(), lock.stat().st_mtime_ns)
    said = "halo-cluster.lock: halo3 left the config: the next deploy records it"
    monkeypatch.setenv("CLUSTER_CONFIG", str(config(tmp_path, 2)))
    monkeypatch.setattr(project, "ROOT", tmp_path)
    monkeypatch.setattr(view, "compare_only", lambda cluster, folder, as_json: 0)
    assert run.main(["--compare"]) == 0
    assert capsys.readouterr().err.splitlines()[0].startswith(said)

    ran: list[str] = []
    monkeypatch.setattr(checks, "main", lambda args: ran.append(capsys.readouterr().err) or 0)
    assert verify.main([]) == 0
    assert ran and ran[0].splitlines()[0].startswith(said), ran
    assert (lock.read_bytes(), lock.stat().st_mtime_ns) == before

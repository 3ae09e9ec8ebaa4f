"""The one transport (halo_cluster/tools/transport.py): every run a Result, never an exception
(a node that refuses, one that says nothing past its bound, no ssh client at all), all nodes at
once, a batched read split by name, each node's shared connection closed at the end. `ssh` is the
bench tests' fake (helpers_bench.fake_ssh): here it runs the script with this machine's shell."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from halo_cluster.node import batch
from halo_cluster.tools import reach, transport
from tests.unit.helpers_bench import cluster, fake_ssh

# argv: -F CONFIG ALIAS sh -s, or -F CONFIG -O exit ALIAS (a master's exit)
LOCAL = """
if [ "$3" = -O ]; then echo "close $5" >> "$LOG"; exit 0; fi
case "$3" in *"$DOWN"*) echo "ssh: connect to host x port 22: Connection refused" >&2; exit 255;;
esac
shift 3; exec "$@"
"""


@pytest.fixture
def ssh(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    fake_ssh(tmp_path, monkeypatch, LOCAL)
    monkeypatch.setenv("PATH", f"{tmp_path / 'fakebin'}:/usr/bin:/bin")
    monkeypatch.setenv("LOG", str(tmp_path / "log"))
    monkeypatch.setenv("DOWN", "nothing-is-down")
    with transport.connected(cluster(tmp_path)) as connected:
        yield connected


def test_a_run_gives_the_code_output_and_the_last_error_line(ssh) -> None:
    result = ssh.run(ssh.nodes[0], "echo out; echo first >&2; echo last >&2; exit 3\n")
    assert (result.code, result.out, result.reached, result.ok) == (3, "out\n", True, False)
    assert result.error == "last"
    assert ssh.run(ssh.nodes[0], "true").ok


def test_a_node_that_refuses_is_its_reason_not_an_exception(ssh, monkeypatch) -> None:
    monkeypatch.setenv("DOWN", "halo-halo2")
    result = ssh.run(ssh.nodes[1], "echo never")
    assert (result.code, result.reached) == (transport.SSH_FAILED, False)
    assert result.reason == "refused (ssh: connect to host x port 22: Connection refused)"
    assert reach.down(result) == f"halo2 (10.0.0.12:22): cannot be reached: {result.reason}"
    assert ssh.probe(5) == {"halo2": result.reason}


def test_a_timeout_is_a_result_saying_so_within_its_bound(ssh) -> None:
    start = time.monotonic()
    result = ssh.run(ssh.nodes[0], "echo started; exec sleep 30", timeout=0.5)
    assert time.monotonic() - start < 5
    assert (result.code, result.reached) == (transport.TIMED_OUT, False)
    assert result.reason == result.error == "timed out (no answer within 0.5 s)"


def test_a_long_run_ticks_while_it_runs(ssh) -> None:
    ticks: list[float] = []
    result = ssh.run(ssh.nodes[0], "sleep 0.7; echo done", tick=ticks.append, every=0.2)
    assert result.out == "done\n" and len(ticks) >= 2 and ticks == sorted(ticks)


def test_no_ssh_client_is_a_result_too(tmp_path, monkeypatch) -> None:
    fake_ssh(tmp_path, monkeypatch, None)
    with transport.connected(cluster(tmp_path)) as ssh:
        result = ssh.run(ssh.nodes[0], "true")
    assert result.code == transport.SSH_FAILED and "ssh" in result.reason


def test_every_node_at_once_by_name(ssh) -> None:
    start = time.monotonic()
    found = ssh.on_all(lambda node: f"sleep 0.6; echo {node.name}")
    assert time.monotonic() - start < 1.1  # one node's time, not two
    assert {name: r.out for name, r in found.items()} == {"halo1": "halo1\n", "halo2": "halo2\n"}


def test_a_batched_read_is_split_back_by_name(ssh) -> None:
    commands = {"a": "printf 'no newline'", "b": "echo b >&2; exit 4", "c": "printf ''"}
    result, parts = ssh.read(ssh.nodes[0], commands)
    assert result.ok
    assert parts == {"a": batch.Part(0, b"no newline"), "b": batch.Part(4, b"", b"b\n"),
                     "c": batch.Part(0)}  # fmt: skip


def test_a_read_cut_by_its_timeout_names_the_parts_not_read(ssh) -> None:
    result, parts = ssh.read(ssh.nodes[0], {"a": "echo a", "b": "exec sleep 30"}, timeout=1)
    assert result.code == transport.TIMED_OUT
    assert parts["b"].status == batch.NOT_RUN and parts["b"].lines == []


def test_each_nodes_shared_connection_is_closed_at_the_end(tmp_path, monkeypatch) -> None:
    fake_ssh(tmp_path, monkeypatch, LOCAL)
    monkeypatch.setenv("PATH", f"{tmp_path / 'fakebin'}:/usr/bin:/bin")
    monkeypatch.setenv("LOG", str(tmp_path / "log"))
    monkeypatch.setenv("DOWN", "nothing-is-down")
    with transport.connected(cluster(tmp_path)) as ssh:
        folder = ssh.config.parent
        assert "ControlMaster auto" in ssh.config.read_text()
    closed = (tmp_path / "log").read_text().splitlines()
    assert closed == ["close halo-halo1", "close halo-halo2"]
    assert not folder.exists()

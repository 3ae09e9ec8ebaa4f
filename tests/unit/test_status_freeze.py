"""`status` during a freeze (issue 37: every process of the cluster user on a worker stopped with
SIGSTOP): a node that says nothing within the read's bound is one line naming it, never a
traceback; a node reached whose commands hang (a stopped user manager: `systemctl --user` waits
on it) has each command stopped at its own bound, said in one line naming the node and the
parts, the rest of its read kept. Real processes that sleep, behind the unit tests' fake ssh."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from halo_cluster.node import batch
from halo_cluster.tools import reach, transport
from halo_cluster.tools.status import read, view
from tests.unit.helpers_bench import fake_ssh
from tests.unit.helpers_status import CLUSTER, LIVE

# argv: -F CONFIG ALIAS sh -s (or -O exit ALIAS): the head answers its read from $ANSWER, the
# worker took the connection and says nothing (its session's shell stopped, as SIGSTOP leaves it)
FROZEN_WORKER = """
if [ "$3" = -O ]; then exit 0; fi
case "$3" in *-b) exec sleep 60;; esac
cat >/dev/null; cat "$ANSWER"
"""
# this machine's shell runs the script: the commands below are only echo and sleep
LOCAL = """
if [ "$3" = -O ]; then exit 0; fi
shift 3; exec "$@"
"""


def test_a_node_silent_past_the_reads_bound_is_one_line(tmp_path, monkeypatch) -> None:
    names = read.gather_commands(CLUSTER, CLUSTER.head)
    answer = tmp_path / "head"
    answer.write_bytes(batch.joined(batch.Part(0) for _ in names))
    fake_ssh(tmp_path, monkeypatch, FROZEN_WORKER)
    monkeypatch.setenv("PATH", f"{tmp_path / 'fakebin'}:/usr/bin:/bin")
    monkeypatch.setenv("ANSWER", str(answer))
    monkeypatch.setattr(read, "READ_SECONDS", 1)
    start = time.monotonic()
    head, worker = read.collect(CLUSTER)
    assert time.monotonic() - start < 10  # the bound, not the sleeping ssh's 60 s
    assert head.reachable and not worker.reachable
    assert worker.unreachable == "b (h2:22): cannot be reached: timed out (no answer within 1 s)"
    assert read.exit_code(CLUSTER, [head, worker]) == read.UNREACHABLE


@pytest.fixture
def local(tmp_path, monkeypatch) -> Iterator[transport.SshTransport]:
    fake_ssh(tmp_path, monkeypatch, LOCAL)
    monkeypatch.setenv("PATH", f"{tmp_path / 'fakebin'}:/usr/bin:/bin")
    with transport.connected(CLUSTER) as ssh:
        yield ssh


def test_a_part_that_hangs_is_stopped_at_its_bound_the_others_read(local, monkeypatch) -> None:
    monkeypatch.setattr(read, "PART_SECONDS", 1)
    start = time.monotonic()
    result, found = local.read(
        CLUSTER.workers[0], read.bounded({"versions": "echo 6.18", "units": "exec sleep 30"})
    )
    assert time.monotonic() - start < 8
    assert result.ok and found["versions"].out == "6.18\n"
    assert found["units"].status == transport.TIMED_OUT


def test_a_part_that_ignores_term_is_killed(local, monkeypatch) -> None:
    """A process that ignores TERM (its children inherit the ignored signal) is killed 2 s
    later: the part's exit is KILL's, still a stopped part."""
    monkeypatch.setattr(read, "PART_SECONDS", 1)
    start = time.monotonic()
    _, found = local.read(CLUSTER.workers[0], read.bounded({"units": "trap '' TERM; sleep 30"}))
    assert time.monotonic() - start < 10
    assert found["units"].status == 128 + 9 and found["units"].status in read.STOPPED


def test_a_node_whose_services_do_not_answer_says_so_and_is_down() -> None:
    """The worker's user manager stopped: `units` and `errors` stopped at their bound; its units
    are unknown (not absent), and one line names the node and what did not answer."""
    names = read.gather_commands(CLUSTER, CLUSTER.workers[0])
    printed = batch.joined(
        batch.Part(transport.TIMED_OUT if name in ("units", "errors") else 0) for name in names
    )
    result = transport.Result(CLUSTER.workers[0], 0, printed.decode(), "")
    worker, _ = read.read_node(CLUSTER, CLUSTER.workers[0], result, result.sections(names))
    assert worker.reachable and worker.silent == ["units", "errors"]
    assert [(u.name, u.state) for u in worker.units] == [("halo-ray", reach.UNKNOWN)]
    assert view.silent_lines([worker]) == [
        f"b: reached, but no answer within {read.PART_SECONDS} s from its read of "
        "units, errors (a process it asks is stopped or stuck)"
    ]
    head = read.NodeStatus("a", "head", "192.168.100.1", ray="alive")
    head.units = [read.Unit("halo-ray", "active"), read.Unit("halo-vllm", "active")]
    head.vllm = {"health": 200}
    worker.ray = "alive"
    assert read.exit_code(CLUSTER, [head, worker]) == read.DOWN


def test_every_read_of_status_is_bounded() -> None:
    """Every command of every node's read under timeout(1), Ray's nodes and the live queries
    included; the head's HTTP reads (vLLM's /health and /v1/models) also by curl's own -m."""
    cluster = LIVE
    for node in cluster.nodes:
        commands = read.bounded(read.gather_commands(cluster, node))
        prefix = f"timeout -k 2 {read.PART_SECONDS} sh -c "
        assert all(command.startswith(prefix) for command in commands.values())
    head = read.gather_commands(cluster, cluster.head)
    assert {"ray", "health", "models", "live:tokens_per_s"} <= set(head)
    curls = [c for c in head.values() if "curl " in c]
    assert len(curls) == 10 and all(" -m " in c for c in curls)
    assert read.READ_SECONDS < transport.READ_SECONDS

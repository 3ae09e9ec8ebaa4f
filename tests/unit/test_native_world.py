"""The native launcher's identity check (node/vllmworld.py): the world size in the head's
leader line and the nodes on its master port, against TP x PP and the configured nodes."""

from __future__ import annotations

from halo_cluster.node import vllmworld as world

# vLLM's line through journald (the EngineCore's prefix, then the logger's)
LINE = (
    "(EngineCore_DP0 pid=212) INFO 12-02 14:01:07 [multiproc_executor.py:134] DP group leader: "
    "node_rank=0, node_rank_within_dp=0, master_addr=192.168.100.1, mq_connect_ip=192.168.100.1 "
    "(local), world_size=3, local_world_size=1"
)
SS = [
    "0      0      192.168.100.1:29501   192.168.100.1:51234",
    "0      0      192.168.100.1:29501   192.168.100.2:40112",
    "0      0      [::ffff:192.168.100.1]:29501   [::ffff:192.168.100.3]:40998",
    "0      0      192.168.100.1:29501   192.168.100.3:40999",
]
NODES = ["192.168.100.2", "192.168.100.1", "192.168.100.3"]


def test_the_world_size_is_the_leaders() -> None:
    assert world.world_size(LINE) == 3
    assert world.world_size("") is None
    assert world.world_size("INFO every rank joined: serving on 192.168.100.1:8000") is None


def test_the_peers_are_each_node_once() -> None:
    assert world.store_peers(SS) == ["192.168.100.1", "192.168.100.2", "192.168.100.3"]
    assert world.store_peers([]) == []


def test_the_configured_world_passes() -> None:
    assert world.not_the_world(3, world.store_peers(SS), 3, NODES, 29501) is None


def test_each_difference_is_one_line() -> None:
    peers = world.store_peers(SS)
    assert world.not_the_world(None, peers, 3, NODES, 29501) == (
        "the head's log names no world size yet (vLLM's `DP group leader` line)"
    )
    assert world.not_the_world(2, peers, 3, NODES, 29501) == (
        "the head's world size is 2, not TP x PP = 3"
    )
    assert world.not_the_world(3, [*peers, "192.168.100.4"], 3, NODES, 29501) == (
        "the ranks on the head's master port 29501 are from [192.168.100.1 192.168.100.2 "
        "192.168.100.3 192.168.100.4], not the configured 192.168.100.1 192.168.100.2 "
        "192.168.100.3"
    )
    assert "are from [none]" in world.not_the_world(3, [], 3, NODES, 29501)


def test_the_commands_read_the_unit_and_the_port() -> None:
    assert "journalctl --user -u halo-vllm.service" in world.leader_command("vllm")
    assert world.peers_command(29501) == "ss -Htn state established 'sport = :29501'"

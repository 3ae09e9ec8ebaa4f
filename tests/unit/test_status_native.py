"""`halo-cluster status` with `serve.launcher: native` (status/ranks.py): no Ray read or shown, one
`halo-vllm` rank per node, which rank runs where and whether the head's world holds it, the
world size against TP x PP, and no object store in the memory budget."""

from __future__ import annotations

from halo_cluster.decide import budget as budget_module
from halo_cluster.node import batch
from halo_cluster.tools import transport
from halo_cluster.tools.status import ranks, read, view
from tests.unit.helpers_native import LEADER, NATIVE, PEERS

UNITS = "NRestarts=0\nId=halo-ray.service\nActiveState=inactive\n\nNRestarts=1\n"
UNITS += "Id=halo-vllm.service\nActiveState=active\nStateChangeTimestamp=Mon 2026-11-30 08:50 UTC\n"


def answered(node_name: str, texts: dict[str, str]) -> read.NodeStatus:
    node = next(n for n in NATIVE.nodes if n.name == node_name)
    names = read.gather_commands(NATIVE, node)
    printed = batch.joined(batch.Part(0, texts.get(name, "").encode()) for name in names)
    found = batch.sections(printed, names)
    result = transport.Result(node, 0, "", "")
    return read.read_node(NATIVE, node, result, found)[0]


def serving(peers: str = PEERS, leader: str = LEADER) -> list[read.NodeStatus]:
    head = answered("a", {"units": UNITS, "world": leader, "peers": peers, "health": "200"})
    return [head, answered("b", {"units": UNITS}), answered("c", {"units": UNITS})]


def test_no_ray_is_read_the_heads_world_is() -> None:
    head = read.gather_commands(NATIVE, NATIVE.head)
    assert "ray" not in head and "podman exec halo-ray" not in batch.named(head)
    assert "DP group leader:" in head["world"] and "sport = :29501" in head["peers"]
    worker = read.gather_commands(NATIVE, NATIVE.workers[0])
    assert "ray" not in worker and "world" not in worker


def test_each_node_shows_its_rank_and_only_its_vllm_unit() -> None:
    statuses = serving()
    ranks.place(NATIVE, statuses)
    assert [[u.name for u in s.units] for s in statuses] == [["halo-vllm"]] * 3
    assert statuses[0].vllm["world"] == {
        "size": 3,
        "nodes": ["192.168.100.1", "192.168.100.2", "192.168.100.3"],
    }
    assert [ranks.cell(s) for s in statuses] == [
        "0 API, in the world",
        "1 headless, in the world",
        "2 headless, in the world",
    ]
    assert [(s.ray, s.gpus) for s in statuses] == [("none", 1)] * 3
    assert read.exit_code(NATIVE, statuses) == read.UP
    text = view.table(NATIVE, statuses)
    header = text.splitlines()[1].split()
    assert header[:3] == ["node", "role", "rank"] and "ray" not in header
    assert "halo-ray" not in text
    assert (
        "vllm world (TP 1 x PP 3 = 3): world size 3; ranks on 192.168.100.1:29501 from "
        "192.168.100.1 192.168.100.2 192.168.100.3"
    ) in text


def test_a_rank_out_of_the_world_or_a_wrong_size_is_down() -> None:
    missing = serving(peers=PEERS.replace("192.168.100.3:40998", "192.168.100.9:40998"))
    ranks.place(NATIVE, missing)
    assert ranks.cell(missing[2]) == "2 headless, not in the world"
    assert missing[2].gpus == 0
    assert read.exit_code(NATIVE, missing) == read.DOWN
    smaller = serving(leader=LEADER.replace("world_size=3", "world_size=2"))
    ranks.place(NATIVE, smaller)
    assert read.exit_code(NATIVE, smaller) == read.DOWN
    assert "world size 2;" in view.table(NATIVE, smaller)
    silent = serving(leader="")
    ranks.place(NATIVE, silent)
    assert "no world size in the head's log" in view.table(NATIVE, silent)


def test_the_ranks_count_every_configured_node_when_some_are_left_out() -> None:
    """--exclude b: c is still rank 2 (its place in `nodes`), the head's world read."""
    statuses = [s for s in serving() if s.name != "b"]
    ranks.place(NATIVE, statuses)
    assert [ranks.cell(s) for s in statuses] == [
        "0 API, in the world",
        "2 headless, in the world",
    ]
    head_out = [s for s in serving() if s.name != "a"]
    ranks.place(NATIVE, head_out)
    assert ranks.cell(head_out[0]) == "1 headless, unknown"
    assert read.exit_code(NATIVE, head_out) == read.UP  # not judged without the head


def test_the_memory_budget_has_no_object_store() -> None:
    from tests.recorded import memory_output

    lines = memory_output([35 * 10**9] * 2)
    budget = read.node_budget(NATIVE, NATIVE.nodes[1], lines)
    assert budget.object_store == 0 and budget.object_store_source == budget_module.NO_RAY

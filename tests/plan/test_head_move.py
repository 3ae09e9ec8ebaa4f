"""The head moves with its cluster (issue 34, item 8), planned on the recorded nodes: a config
that lists the lock's members in another order is a head move, not another cluster; the new
head gets the old head's history with a `moved-head` line after it and the lock's `head`, the
old head's vLLM is stopped and removed and its Ray rejoins as a worker. A lock none of whose
nodes the config names is still another cluster's."""

from __future__ import annotations

import base64
import json
import shlex
import subprocess
from pathlib import Path

import pytest
import yaml

from halo_cluster.config import lock as locks
from halo_cluster.config.loader import parse_cluster
from halo_cluster.config.model import ConfigError
from halo_cluster.node.facts import TextFiles
from halo_cluster.node.image import HeadHistory, moves_command
from tests.plan.harness import one_read, plan
from tests.plan.nodes import HOME, RESOLVED, SERVE, converged, serve_cluster

NAME = "docker.io/kyuz0/vllm-therock-gfx1151"
HISTORY = f"{HOME}/{locks.HISTORY}"
OTHER = "sha256:" + "ab" * 32
UNITS = f"{HOME}/.config/containers/systemd"


def old_lines(digest: str = RESOLVED) -> list[str]:
    """The old head's history: the deploy's resolve and a later line of another kind."""
    resolved = locks.history_line(
        "resolved", reference=f"{NAME}:latest", digest=digest, changed=True
    )
    return [resolved, locks.history_line("bench", digest=digest)]


OLD = old_lines()  # halo1's history, the same in every plan


def reversed_cluster(tmp_path: Path, names: tuple[str, ...] = ("halo2", "halo1")):
    """The 2-node serving config with `names` in that order (the first is the head), each node
    on the data address it had (halo1 .1, halo2 .2)."""
    lines = ["interconnect: roce", "cluster_user: vllm", SERVE % ""]
    lines += ["subnet: 192.168.100.0/29"] if max(names) > "halo2" else []
    lines.append("nodes:")
    lines += [
        f"  - {{name: {n}, ssh: {{host: 10.0.0.1{n[-1]}}}, "
        f"data: {{interface: auto, address: 192.168.100.{n[-1]}}}}}"
        for n in names
    ]
    # the Ray token beside it: the one serve_cluster made for the config before
    return parse_cluster(yaml.safe_load("\n".join(lines)), base_dir=tmp_path)


def write_lock(tmp_path: Path, head: str = "halo1", names: tuple[str, ...] = ("halo1", "halo2")):
    members = tuple(locks.Member(n, f"192.168.100.{n[-1]}") for n in names)
    locks.write(
        tmp_path / locks.LOCK_FILE, locks.Lock(head, f"{NAME}:latest", RESOLVED, members=members)
    )


def with_history(node: dict, lines: list[str]) -> dict:
    """The node's snapshot with the cluster user's history file."""
    text = "".join(f"{line}\n" for line in lines)
    encoded = base64.b64encode(text.encode()).decode()
    return {**node, TextFiles: [*node[TextFiles], f"{HISTORY} 644 {encoded}"]}


def moved(tmp_path: Path, old_head: dict | None = None, new_head: dict | None = None):
    """The serving cluster as halo1 headed it (converged, its history), planned with halo2
    first: the head moved."""
    write_lock(tmp_path)
    before = serve_cluster(tmp_path=tmp_path)
    nodes = {
        "halo1": old_head or with_history(converged(before, "halo1"), OLD),
        "halo2": new_head or converged(before, "halo2"),
    }
    after = reversed_cluster(tmp_path)
    return after, plan(after, nodes)


def test_a_reversed_order_is_a_head_move_not_another_cluster(tmp_path: Path) -> None:
    after, result = moved(tmp_path)
    assert after.container.moved_from == "halo1" and after.head.name == "halo2"
    assert result.refused == {}
    one_read(result)  # the old head's history came in its one read
    lock = tmp_path.resolve() / locks.LOCK_FILE
    assert f"Image and toolbox | Record halo2 as the head in {lock}" in result.names("halo2")
    assert not any("as the head" in n for n in result.names("halo1"))
    # written when the operation runs, never while planning
    assert json.loads(lock.read_text())["head"] == "halo1"


def test_the_history_is_carried_to_the_new_head(tmp_path: Path) -> None:
    _, result = moved(tmp_path)
    names = result.names("halo2")
    carry = names.index("Image and toolbox | The head's history, from halo1")
    assert carry < next(i for i, n in enumerate(names) if "as the head in" in n)
    written = result.uploads("halo2")[HISTORY].splitlines()
    assert written[:2] == OLD
    line = json.loads(written[-1])
    assert len(written) == 3 and line["event"] == "moved-head"
    assert (line["from"], line["to"], line["digest"], line["carried"]) == (
        "halo1",
        "halo2",
        RESOLVED,
        True,
    )
    # the history as the new head will read it agrees with the lock
    assert HeadHistory().process(written).digest == RESOLVED
    assert HISTORY not in result.uploads("halo1")


def test_the_old_head_becomes_a_worker(tmp_path: Path) -> None:
    _, result = moved(tmp_path)
    removals = [
        op for op in result.ops["halo1"] if op.name.startswith("Cluster services | Stop and remove")
    ]
    # the old head's watchdog goes with its vLLM: a worker runs none
    assert [op.name for op in removals if "watchdog" in op.name] == [
        "Cluster services | Stop and remove the stall watchdog"
    ]
    removal = next(op for op in removals if "watchdog" not in op.name)
    assert "systemctl --user stop halo-vllm.service" in " ".join(removal.commands)
    # its vLLM, if it ended failed when stopped, is not listed as failed after it
    assert "systemctl --user reset-failed halo-vllm.service" in " ".join(removal.commands)
    assert f"{UNITS}/halo-vllm.container" in " ".join(removal.commands)
    ray_start = next(t for p, t in result.uploads("halo1").items() if p.endswith("ray-start.sh"))
    assert "--head" not in ray_start and "192.168.100.2" in ray_start
    assert f"{UNITS}/halo-vllm.container" in result.uploads("halo2")


def test_the_old_heads_history_is_what_the_lock_is_checked_against(tmp_path: Path) -> None:
    """The new head's own history (it headed the cluster long ago) is not the cluster's: the
    old head's says what runs, and one that disagrees with the lock is refused as before."""
    stale = with_history(converged(serve_cluster(tmp_path=tmp_path), "halo2"), old_lines(OTHER))
    _, result = moved(tmp_path, new_head=stale)
    assert result.refused == {}
    written = result.uploads("halo2")[HISTORY]
    assert OTHER not in written  # replaced by the carried history

    disagreeing = with_history(
        converged(serve_cluster(tmp_path=tmp_path), "halo1"), old_lines(OTHER)
    )
    _, result = moved(tmp_path, old_head=disagreeing)
    assert set(result.refused) == {"halo1", "halo2"}
    assert f"head: runs {OTHER} since" in result.refused["halo2"]


def test_an_old_head_that_left_leaves_a_moved_head_line(tmp_path: Path) -> None:
    """halo1 left the config: its history is out of reach, the new head's history says what
    the lock says from the move on."""
    write_lock(tmp_path, names=("halo1", "halo2", "halo3"))
    before = serve_cluster(nodes=3, tmp_path=tmp_path)
    after = reversed_cluster(tmp_path, ("halo2", "halo3"))
    assert after.container.moved_from == "halo1"
    result = plan(after, {n: converged(before, n) for n in ("halo2", "halo3")})
    assert result.refused == {}
    written = result.uploads("halo2")[HISTORY].splitlines()
    line = json.loads(written[-1])
    assert len(written) == 1 and line["event"] == "moved-head" and line["carried"] is False
    assert HeadHistory().process(written).digest == RESOLVED


@pytest.mark.parametrize("head", ["node1", "halo9"])
def test_a_lock_none_of_whose_nodes_is_in_the_config_is_another_clusters(
    tmp_path: Path, head: str
) -> None:
    write_lock(tmp_path, head=head, names=(head, "node2"))
    with pytest.raises(ConfigError) as refused:
        reversed_cluster(tmp_path)
    path = (tmp_path / locks.LOCK_FILE).resolve()
    assert f"{path}: the lock of another cluster (head {head}): one cluster per folder" in str(
        refused.value
    )


def test_a_head_that_stays_moves_nothing(tmp_path: Path) -> None:
    write_lock(tmp_path)
    serve_cluster(tmp_path=tmp_path)
    cluster = reversed_cluster(tmp_path, ("halo1", "halo2"))
    assert cluster.container.moved_from == ""
    result = plan(cluster, {n: converged(cluster, n) for n in ("halo1", "halo2")})
    assert not any("history" in n or "as the head" in n for n in result.names("halo1"))


def test_the_heads_read_finds_the_moved_head_line(tmp_path: Path) -> None:
    """The new head's history read by its real command (`moves_command`): the `moved-head`
    line after the carried lines says what it runs, bench lines after it do not hide it."""
    path = tmp_path / "history.jsonl"
    moved = locks.history_line("moved-head", reference=f"{NAME}:latest", digest=OTHER,
                               to="halo2", carried=False, **{"from": "halo1"})  # fmt: skip
    path.write_text("\n".join([*OLD, moved, *old_lines()[1:]]) + "\n")
    command = moves_command(shlex.quote(str(path)))
    output = subprocess.run(["sh", "-c", command], capture_output=True, text=True, check=True)
    assert output.stdout.strip() == moved
    assert HeadHistory().process(output.stdout.splitlines()).digest == OTHER

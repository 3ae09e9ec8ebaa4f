"""Membership with `serve.launcher: native`, planned on recorded nodes: a node added or removed
changes every rank's `--nnodes`, the ranks are numbered again in the order of `nodes` and every
rank restarts together; a departed node's rank is taken out by the head, with no Ray token in
the line, the history or the run (none is used)."""

from __future__ import annotations

import logging
from pathlib import Path

from halo_cluster.config import lock as locks
from halo_cluster.roles.serve.facts import DepartedServices
from tests.plan.harness import plan
from tests.plan.nodes import CONFIG, RESOLVED, native_node, serve_cluster, user_node

NATIVE = ", launcher: native"
NAME = "docker.io/kyuz0/vllm-therock-gfx1151"
GONE = "192.168.100.3"
TAKE_OUT = f"Cluster services | Take halo3 ({GONE}) out of the cluster"
STOP = "Cluster services | Stop every rank's halo-vllm, to start them together"
START = "Cluster services | Start every rank's halo-vllm"


def rank_words(result, name: str) -> list[str]:
    start = result.uploads(name)[f"{CONFIG}/vllm-start.sh"]
    return start[start.index("exec vllm serve ") :].split()


def acting(result, name: str) -> list[str]:
    return [op.name for op in result.ops[name] if op.commands or op.uploads]


def test_a_removed_node_renumbers_and_restarts_every_rank(tmp_path: Path, caplog) -> None:
    three = serve_cluster(3, serve=NATIVE, tmp_path=tmp_path)
    nodes = {n: native_node(three, n) for n in ("halo1", "halo2")}
    members = tuple(locks.Member(f"halo{i}", f"192.168.100.{i}") for i in (1, 2, 3))
    locks.write(tmp_path / locks.LOCK_FILE, locks.Lock("halo1", f"{NAME}:latest", RESOLVED,
                                                       members=members))  # fmt: skip
    nodes["halo1"][DepartedServices] = [f"{GONE} 0"]
    caplog.set_level(logging.INFO)
    result = plan(serve_cluster(serve=NATIVE, tmp_path=tmp_path), nodes)
    for rank, name in enumerate(("halo1", "halo2")):
        words = rank_words(result, name)
        assert "--nnodes=2" in words and f"--node-rank={rank}" in words, words
        assert STOP in acting(result, name) and START in acting(result, name), name
    take_out = next(op for op in result.ops["halo1"] if op.name == TAKE_OUT)
    assert "systemctl --user stop halo-vllm.service halo-ray.service" in take_out.commands[0]
    assert '"token_rotated":false' in take_out.commands[1]
    assert not any("Ray's token" in op.name for op in result.ops["halo1"])
    assert "every rank restarts together: its vllm_start changed" in caplog.text


def test_an_added_node_is_the_last_rank_and_every_rank_restarts(tmp_path: Path) -> None:
    two = serve_cluster(serve=NATIVE, tmp_path=tmp_path)
    nodes = {n: native_node(two, n) for n in ("halo1", "halo2")}
    nodes["halo3"] = user_node()
    result = plan(serve_cluster(3, serve=NATIVE, tmp_path=tmp_path), nodes)
    for rank, name in enumerate(("halo1", "halo2", "halo3")):
        words = rank_words(result, name)
        assert "--nnodes=3" in words and f"--node-rank={rank}" in words, words
        assert ("--headless" in words) == (rank > 0)
        assert STOP in acting(result, name) and START in acting(result, name), name


def test_an_unreachable_departed_node_is_said_without_a_ray_token(tmp_path: Path, caplog) -> None:
    two = serve_cluster(serve=NATIVE, tmp_path=tmp_path)
    members = tuple(locks.Member(f"halo{i}", f"192.168.100.{i}") for i in (1, 2, 3))
    locks.write(tmp_path / locks.LOCK_FILE, locks.Lock("halo1", f"{NAME}:latest", RESOLVED,
                                                       members=members))  # fmt: skip
    nodes = {n: native_node(two, n) for n in ("halo1", "halo2")}
    nodes["halo1"][DepartedServices] = [f"{GONE} 255"]
    caplog.set_level(logging.INFO)
    result = plan(serve_cluster(serve=NATIVE, tmp_path=tmp_path), nodes)
    assert TAKE_OUT not in result.names("halo1")
    assert (
        f"halo3 ({GONE}) left the cluster but cannot be reached: its services may still run; if "
        "its vLLM rank still runs, the head's master port shows it (the /health wait names it): "
        "stop its halo-vllm"
    ) in caplog.text
    assert "Ray token" not in caplog.text

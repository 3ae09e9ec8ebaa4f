"""vLLM's engine start bound (VLLM_ENGINE_READY_TIMEOUT_S, vllm/envs.py: 600 s) planned from
`serve.ready_timeout` and the node's share of the model's safetensors (roles/serve/
enginestart.py), in vLLM's environment with either launcher, and the watchdog's bound over it."""

from __future__ import annotations

import json

import pytest

from halo_cluster.roles.serve import enginestart, watchdog
from tests.plan.harness import plan
from tests.plan.nodes import CONFIG, HOME, converged, plan_cluster, serve_cluster
from tests.recorded import memory_output

UNITS = f"{HOME}/.config/containers/systemd"
ENGINE_ENV = f"{CONFIG}/vllm-engine.env"
# a "120 GB" model (the upper size): 8 safetensors of 15 GB, 60 GB on each of TP=2 nodes
LARGE = [15_000_000_000] * 8
QWEN_14B = [3_700_000_000] * 8  # Qwen3-14B in bf16


def bound(uploads: dict[str, str]) -> int:
    lines = [ln for ln in uploads[ENGINE_ENV].splitlines() if not ln.startswith("#")]
    assert len(lines) == 1 and lines[0].startswith("VLLM_ENGINE_READY_TIMEOUT_S="), lines
    return int(lines[0].partition("=")[2])


def test_the_bound_rises_with_the_share_up_to_the_deploys_wait() -> None:
    gib = enginestart.GIB
    assert enginestart.seconds(1800, None) == 1800  # not on the node yet: the most a start takes
    assert enginestart.seconds(1800, 0) == 600  # vLLM's own default is the floor
    assert enginestart.seconds(1800, 60 * gib) == 1200  # kyuz0's launcher's wait
    assert enginestart.seconds(1800, 60 * gib + 1) == 1201  # rounded up
    assert enginestart.seconds(1800, 200 * gib) == 1800  # never past serve.ready_timeout
    assert enginestart.seconds(300, 60 * gib) == 600  # nor below vLLM's default
    assert enginestart.seconds(300, None) == 600


@pytest.mark.parametrize(
    ("weights", "serve", "expected"),
    [
        (None, "", 1800),  # the deploy fetches the model: serve.ready_timeout
        (LARGE, "", 600 + -(-60_000_000_000 * 10 // enginestart.GIB)),  # 1159
        (QWEN_14B, "", 600 + -(-14_800_000_000 * 10 // enginestart.GIB)),  # 738
        (LARGE, ", ready_timeout: 900", 900),
        (LARGE, ", ready_timeout: 120", 600),
    ],
)
def test_the_heads_vllm_gets_it_with_ray(weights, serve: str, expected: int) -> None:
    result = plan_cluster(serve_cluster(serve=serve), memory=memory_output(weights))
    head = result.uploads("halo1")
    assert bound(head) == expected
    unit = head[f"{UNITS}/halo-vllm.container"].splitlines()
    assert f"EnvironmentFile=%h/{ENGINE_ENV.removeprefix(HOME + '/')}" in unit
    assert ENGINE_ENV not in result.uploads("halo2")  # a worker's Ray runs no API server
    settings = json.loads(head[f"{HOME}/{watchdog.SETTINGS}"])
    assert settings["down_seconds"] == expected + enginestart.WATCHDOG_MARGIN


def test_every_rank_gets_it_with_native() -> None:
    cluster = serve_cluster(serve=", launcher: native")
    result = plan_cluster(cluster, memory=memory_output(LARGE))
    for node in ("halo1", "halo2"):
        uploads = result.uploads(node)
        assert bound(uploads) == 1159
        assert "EnvironmentFile=%h/.config/halo-cluster/vllm-engine.env" in (
            uploads[f"{UNITS}/halo-vllm.container"].splitlines()
        )


def test_a_new_bound_restarts_nothing() -> None:
    """Read at vLLM's start only: the running engine is past it, a restarting one takes it.
    The watchdog restarts with its new bound (it serves nothing)."""
    before = serve_cluster()
    after = serve_cluster(serve=", ready_timeout: 3600")
    nodes = {n.name: converged(before, n.name) for n in before.nodes}
    result = plan(after, nodes)
    assert bound(result.uploads("halo1")) == 3600
    ops = [op for op in result.names("halo1") if op.startswith("Cluster services | Restart")]
    assert ops == ["Cluster services | Restart halo-watchdog"], ops


def test_serve_env_cannot_set_it() -> None:
    from halo_cluster.config.loader import ConfigError

    with pytest.raises(ConfigError, match=r"serve\.ready_timeout"):
        serve_cluster(serve=", env: {VLLM_ENGINE_READY_TIMEOUT_S: '60'}")

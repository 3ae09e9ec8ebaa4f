"""How long vLLM's engine may take to start, derived here once: `VLLM_ENGINE_READY_TIMEOUT_S`,
the API server's wait for its engine cores to be ready (weights loaded, every rank joined,
compiles and graph capture done) before it gives up and exits 1 (vllm/envs.py: 600 s by default;
vllm/v1/engine/core_client.py: "Timed out waiting for engine core processes to start"). A node
loading 60-120 GB into GTT with gfx1151's first Triton compiles can pass 600 s, and the unit then
restarts into the same wait for ever (kyuz0's launcher waits 1,200 s).

vLLM's container gets it with either launcher (`vllm-engine.env`, written with vLLM's files);
the head's watchdog waits that long, plus a restart's margin, before it takes a head that is not
ready for one waiting on ranks that will not come (watchdog.py)."""

from __future__ import annotations

from pyinfra import host

from halo_cluster.node.nodefiles import cached
from halo_cluster.roles.serve import budget

VARIABLE = "VLLM_ENGINE_READY_TIMEOUT_S"
VLLM_DEFAULT = 600  # vllm/envs.py: what vLLM gives a start of its own
# each GiB of the node's share of the weights read into GTT (mmap of the safetensors, then the
# copy to the GPU's memory): 100 MiB/s, a slow disk's pace; a 60 GiB share gets 1,200 s
SECONDS_PER_GIB = 10
GIB = 1024**3
# the watchdog's margin over the engine's own bound: vLLM's exit and systemd's restart
WATCHDOG_MARGIN = 300


def seconds(ready_timeout: int, share_bytes: int | None) -> int:
    """vLLM's default for what every start does (compiles, graph capture, profiling), plus
    SECONDS_PER_GIB for each GiB of this node's share of the weights; never more than
    `serve.ready_timeout` (the deploy's own wait for /health: a start that needs more does not
    serve within it anyway) nor less than vLLM's default. Weights not on the node yet (this
    deploy fetches them): `serve.ready_timeout`, the most a start may take."""
    if share_bytes is None:
        return max(VLLM_DEFAULT, ready_timeout)
    needed = VLLM_DEFAULT + -(-share_bytes * SECONDS_PER_GIB // GIB)
    return max(VLLM_DEFAULT, min(ready_timeout, needed))


def for_node() -> int:
    """This node's bound: its share of the model's safetensors (their sum / TP x PP, as the
    memory budget weighs them: the same read)."""
    data = host.data
    fact, kwargs = budget.read(data)
    found = cached(host, fact, **kwargs)
    total = sum(found["weights"]) if found["dir"] and found["weights"] else None
    share = None if total is None else -(-total // data.halo_serve_gpus)
    return seconds(data.halo_serve_ready_timeout, share)


def env_file() -> str:
    """vllm-engine.env: read by vLLM at its start only, so a change restarts nothing (files.py):
    a running engine is past its start, a restarting one takes the new bound."""
    return (
        "# Managed by halo-cluster: how long vLLM's API server waits for its engine to be ready\n"
        "# (serve.ready_timeout and this node's share of the model: roles/serve/enginestart.py)\n"
        f"{VARIABLE}={for_node()}\n"
    )

"""The serve role's memory budget: every node's, weighed on the head before vLLM starts
(`halo_cluster/decide/budget.py` decides, `halo_cluster/node/memory.py` reads)."""

from __future__ import annotations

import shlex

from pyinfra import host, logger
from pyinfra.operations import server

from halo_cluster.config.docs import page
from halo_cluster.decide import budget
from halo_cluster.node.memory import MemoryReading, ModelWeights, NodeMemory, model_dir
from halo_cluster.node.nodefiles import cached
from halo_cluster.roles.serve.peers import nodes

PAGE = page("roles/serve.md")  # what the budget is, which the refusals name
NOT_STARTED = f"memory budget: vLLM not started ({PAGE}): "


def read(data) -> tuple[type, dict]:
    """The model's weights; the node's memory is the deploy's NodeMemory, read on every node."""
    return ModelWeights, {"user": data.halo_cluster_user, "model": data.halo_serve_model}


def of(name: str, found: MemoryReading, data) -> budget.Budget:
    """One node's budget from its NodeMemory and ModelWeights facts and the cluster's keys."""
    return budget.from_reading(
        name,
        found,
        model=data.halo_serve_model,
        utilization=data.halo_serve_gpu_memory_utilization,
        object_store_mib=data.halo_serve_object_store_mib,
        gpus=data.halo_serve_gpus,
        parallelism=data.halo_serve_parallelism,
        configured_gtt_bytes=data.halo_kernel_gtt_bytes,
        ray=data.halo_serve_launcher == "ray",
    )


def cluster_budgets() -> list[budget.Budget]:
    """Every reachable node's budget, the head's first (read from each node's one command)."""
    return [of(h.data.halo_node, _read(h), h.data) for h in nodes()]


def _read(node) -> MemoryReading:
    fact, kwargs = read(node.data)
    return MemoryReading(**cached(node, NodeMemory), **cached(node, fact, **kwargs))


def check() -> list[str]:
    """On the head: log every node's budget; the problems that refuse vLLM's start, one per
    node's problem (none: vLLM may start)."""
    budgets = cluster_budgets()
    prefix = host.print_prefix
    logger.info(f"{prefix}memory budget ({PAGE}):\n{budget.table(budgets)}")
    for b in budgets:
        for note in b.notes:
            log = logger.warning if b.status == budget.WARN else logger.info
            log(f"{prefix}memory budget {b.node}: {note}")
    return [f"{b.node}: {p}" for b in budgets for p in b.problems]


def refusal(problems: list[str]) -> str:
    """The head's one refusal line: every node's numbers and fix (`report.fail` prints it, drift
    shows it, the run exits 1)."""
    return NOT_STARTED + " | ".join(problems)


def weigh_downloaded() -> None:
    """On the head, after a download in this run: the weights the plan could not weigh yet,
    weighed on the node before they are copied and before vLLM starts; more than the smallest
    node's share fails the head there, with the numbers and the fix."""
    data = host.data
    shares = sorted((b.vllm, b.node) for b in cluster_budgets() if b.vllm)
    if not shares:
        return
    vllm, node = shares[0]
    limit = int(vllm * budget.WEIGHTS_SHARE)
    gpus = data.halo_serve_gpus
    model = data.halo_serve_model
    refusal = (
        f"{NOT_STARTED}{node}: {model}: the "
        f"downloaded weights on each node (their sum / TP x PP {gpus}) are more than "
        f"{budget.WEIGHTS_SHARE:.0%} of what vLLM may take, {budget.gib(vllm)}: use a larger "
        "TP x PP, a higher serve.gpu_memory_utilization or kernel.gtt_gib if the memory sum "
        "allows, or a smaller (quantized) model"
    )
    script = (
        f"d={model_dir(data.halo_cluster_user, model)}; total=0; "
        'for f in "$d"/*.safetensors; do [ -e "$f" ] || continue; '
        'total=$((total + $(stat -L -c %s "$f"))); done; '
        f'echo "weights: $total bytes, $((total / {gpus})) per node, at most {limit}"; '
        f"[ $((total / {gpus})) -le {limit} ] || {{ echo {shlex.quote(refusal)} >&2; exit 1; }}"
    )
    server.shell(name="Memory budget: weigh the downloaded weights", commands=[script])

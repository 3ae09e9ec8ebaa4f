"""The serve role's memory budget: every node's, weighed on the head before vLLM starts
(`halo_cluster/decide/budget.py` decides, `halo_cluster/node/memory.py` reads)."""

from __future__ import annotations

from pyinfra import host, logger

from halo_cluster.decide import budget
from halo_cluster.node.memory import NodeMemory
from halo_cluster.node.nodefiles import cached
from roles.serve.weights import nodes


def read(data) -> tuple[type, dict]:
    return NodeMemory, {"user": data.halo_cluster_user, "model": data.halo_serve_model}


def of(name: str, found: dict, data) -> budget.Budget:
    """One node's budget from its NodeMemory fact and the cluster's keys (host data)."""
    return budget.from_reading(
        name,
        found,
        model=data.halo_serve_model,
        utilization=data.halo_serve_gpu_memory_utilization,
        object_store_mib=data.halo_serve_object_store_mib,
        tp=data.halo_serve_tensor_parallel_size,
        pp=data.halo_serve_pipeline_parallel_size,
        gtt_gib=data.halo_kernel_gtt_gib,
    )


def cluster_budgets() -> list[budget.Budget]:
    """Every reachable node's budget, the head's first (read from each node's one command)."""
    return [of(h.data.halo_node, _read(h), h.data) for h in nodes()]


def _read(node) -> dict:
    fact, kwargs = read(node.data)
    return cached(node, fact, **kwargs)


def check() -> list[str]:
    """On the head: log every node's budget; the problems that refuse vLLM's start, one per
    node's problem (none: vLLM may start)."""
    budgets = cluster_budgets()
    prefix = host.print_prefix
    logger.info(f"{prefix}memory budget (docs/roles/serve.md):\n{budget.table(budgets)}")
    for b in budgets:
        for note in b.notes:
            log = logger.warning if b.status == budget.WARN else logger.info
            log(f"{prefix}memory budget {b.node}: {note}")
    return [f"{b.node}: {p}" for b in budgets for p in b.problems]


def refusal(problems: list[str]) -> str:
    """The head's one refusal line: every node's numbers and fix (`report.fail` prints it, drift
    shows it, the run exits 1)."""
    return "memory budget: vLLM not started (docs/roles/serve.md): " + " | ".join(problems)

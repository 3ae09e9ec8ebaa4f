"""Whether a model fits this cluster before anything is downloaded: its weights per node and
its KV cache (kvcache.py, vLLM's arithmetic) against what vLLM may take on a node, the memory
budget's own numbers (decide/budget.py: GTT x serve.gpu_memory_utilization, weights at most
WEIGHTS_SHARE of it). Activations, CUDA/HIP graphs and the sampler's memory are not modelled:
vLLM takes them from the same share, so a model that fits here with no room left can still be
refused by vLLM at start (docs/models.md). `judge` is the one computation `halo-cluster fit` and
the deploy's preflight (the serve role's fit.py) both run."""

from __future__ import annotations

from dataclasses import dataclass

from halo_cluster.decide import budget, kvcache


@dataclass(frozen=True)
class Estimate:
    tp: int
    pp: int
    weights_total: int
    weights_node: int
    vllm: int  # what vLLM may take on a node: GTT x gpu_memory_utilization
    kv_available: int  # vllm - weights_node (activations not modelled)
    kv_per_token: int  # on the fullest node, every layer counted as full attention
    kv_needed: int  # concurrency sequences of max_model_len
    max_model_len: int
    concurrency: int
    largest_len: int  # at this concurrency, at most the model's own
    problems: tuple[str, ...]  # the budget's refusal of the weights, and the cache's

    @property
    def fits(self) -> bool:
        return not self.problems


def estimate(
    att: kvcache.Attention,
    weights_total: int,
    *,
    model: str,
    tp: int,
    pp: int,
    gtt_bytes: int,
    utilization: float,
    max_model_len: int | None,
    concurrency: int,
) -> Estimate:
    """The estimate at TP x PP; `max_model_len` None: the model's own (vLLM's default)."""
    gpus = tp * pp
    b = budget.decide(
        "each node",
        memtotal_kib=0,  # the sum against MemTotal is the deploy's, on the node it reads
        gtt_bytes=gtt_bytes,
        gtt_source="kernel.gtt_gib",
        utilization=utilization,
        object_store_mib=None,
        weights_bytes=weights_total,
        gpus=gpus,
        parallelism=f"TP {tp} x PP {pp}",
        model=model,
        ray=False,
    )
    weights = b.weights or 0
    length = max_model_len or att.max_position
    if not length:
        raise kvcache.ModelConfigError(
            "config.json: no max_position_embeddings: give --max-model-len"
        )
    available = max(0, b.vllm - weights)
    need = concurrency * kvcache.needed(att, tp, pp, length)
    problems = list(b.problems)
    largest = kvcache.largest_len(att, tp, pp, available, concurrency)
    if not problems and need > available:
        problems.append(
            f"{model}: KV cache {budget.gib(need)} for {concurrency} x {length} tokens is more "
            f"than the {budget.gib(available)} left on each node (vLLM {budget.gib(b.vllm)} - "
            f"weights {budget.gib(weights)}): the largest max_model_len at concurrency "
            f"{concurrency} is {largest}"
        )
    return Estimate(
        tp,
        pp,
        weights_total,
        weights,
        b.vllm,
        available,
        kvcache.per_token(att, tp, pp),
        need,
        length,
        concurrency,
        largest,
        tuple(problems),
    )


def layouts(nodes: int) -> list[tuple[int, int]]:
    """Every TP x PP of at most `nodes` GPUs (one per node), the fewest nodes first, then the
    larger TP (vLLM's faster split within a step)."""
    return [(n // pp, pp) for n in range(1, nodes + 1) for pp in range(1, n + 1) if n % pp == 0]


def smallest(nodes: int, **kwargs) -> Estimate | None:
    """The first of `layouts` that fits, None when none does on this many nodes."""
    for tp, pp in layouts(nodes):
        found = estimate(tp=tp, pp=pp, **kwargs)
        if found.fits:
            return found
    return None


def kv_cache_dtype(extra_args: tuple[str, ...]) -> str:
    """`--kv-cache-dtype X` (or `=X`) among serve.extra_args, else vLLM's `auto`."""
    for i, arg in enumerate(extra_args):
        if arg == "--kv-cache-dtype" and i + 1 < len(extra_args):
            return extra_args[i + 1]
        if arg.startswith("--kv-cache-dtype="):
            return arg.partition("=")[2]
    return "auto"


@dataclass(frozen=True)
class Judged:
    att: kvcache.Attention
    asked: Estimate  # at the TP x PP asked
    smallest: Estimate | None  # the first of `layouts` that fits, None when none does
    nodes: int


def judge(
    config: dict,
    weights_total: int,
    *,
    model: str,
    extra_args: tuple[str, ...],
    tp: int,
    pp: int,
    nodes: int,
    gtt_bytes: int,
    utilization: float,
    max_model_len: int | None,
    concurrency: int,
) -> Judged:
    """The estimate of config.json (a dict) and the weights' bytes at TP x PP and the smallest
    layout on `nodes` that fits; raises kvcache.ModelConfigError naming a field it lacks."""
    att = kvcache.attention(config, kv_cache_dtype(tuple(extra_args)))
    common = dict(
        model=model,
        gtt_bytes=gtt_bytes,
        utilization=utilization,
        max_model_len=max_model_len,
        concurrency=concurrency,
    )
    asked = estimate(att, weights_total, tp=tp, pp=pp, **common)
    found = smallest(nodes, att=att, weights_total=weights_total, **common)
    return Judged(att, asked, found, nodes)

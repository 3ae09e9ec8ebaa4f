"""The deploy's fit estimate: before any role changes a node and before any byte of the model is
downloaded, the same estimate as `halo-cluster fit` (`halo_cluster/decide/fitestimate.py`'s
`judge`) of `serve.model`, from its config.json and its weights' size as the head reads them
(`ModelConfig`: the cluster user's cache, else the hub's API for those two small answers). A
model that cannot fit is every node's preflight refusal, one line with the numbers; one whose
files could not be read is a WARN, and the deploy goes on as before: the memory budget weighs
the weights once they are downloaded (budget.py, docs/models.md)."""

from __future__ import annotations

from typing import Any

from halo_cluster.config.docs import page
from halo_cluster.config.quoting import quote
from halo_cluster.decide import fitestimate, kvcache
from halo_cluster.decide.budget import WEIGHTS_SHARE, gib
from halo_cluster.decide.preflight import FAIL, OK, WARN, Check
from halo_cluster.node.image import head_host
from halo_cluster.node.nodefiles import cached
from halo_cluster.roles.serve import weights
from halo_cluster.roles.serve.facts import ModelConfig, ModelConfigReading, complete
from halo_cluster.roles.serve.files import BY_NAME

NAME = "model fit"
HUB = "https://huggingface.co"  # huggingface_hub's default endpoint, HF_ENDPOINT unset
TRUE = ("1", "ON", "YES", "TRUE")  # huggingface_hub's own truthy values of HF_HUB_OFFLINE
PAGE = page("models.md")


def read(data: Any) -> tuple[type, dict] | None:
    """The head's read of the model's config.json (None elsewhere, or not serving)."""
    if data.halo_role != "head" or not data.halo_serve_enabled or not data.halo_serve_model:
        return None
    return ModelConfig, _kwargs(data)


def _kwargs(data: Any) -> dict:
    env = data.halo_serve_env
    token = f"~{data.halo_cluster_user}/{BY_NAME['hf_token'].path}"
    return {
        "user": data.halo_cluster_user,
        "model": data.halo_serve_model,
        "endpoint": env.get("HF_ENDPOINT") or HUB,
        "token": token if data.halo_serve_hf_token_file else "",
        # a node that may not fetch the model may not ask the hub either
        "online": data.halo_serve_download != weights.NEVER
        and str(env.get("HF_HUB_OFFLINE", "")).upper() not in TRUE,
    }


def check(node_host: Any) -> list[Check]:
    """This node's preflight check of the model (every node judges the head's one reading)."""
    data = node_host.data
    if not data.halo_serve_enabled or not data.halo_serve_model:
        return []
    head = head_host()
    kwargs = _kwargs(head.data)
    found = cached(head, ModelConfig, **kwargs)
    model = data.halo_serve_model
    total = _weights(head, found)
    if found["config"] is None or total is None:
        return [Check(NAME, WARN, _unknown(model, _why(found, kwargs["online"])))]
    try:
        judged = fitestimate.judge(
            found["config"],
            total,
            model=model,
            extra_args=tuple(data.halo_serve_extra_args),
            tp=data.halo_serve_tensor_parallel_size,
            pp=data.halo_serve_pipeline_parallel_size,
            nodes=len(data.halo_peers) + 1,
            gtt_bytes=data.halo_kernel_gtt_bytes,
            utilization=data.halo_serve_gpu_memory_utilization,
            max_model_len=data.halo_serve_max_model_len,
            concurrency=1,  # vLLM's start check: one sequence of max_model_len
        )
    except kvcache.ModelConfigError as error:
        return [Check(NAME, WARN, _unknown(model, f"{found['source']}: {error}"))]
    if judged.asked.fits:
        return [Check(NAME, OK, _fits(model, judged, found["source"]))]
    return [Check(NAME, FAIL, refusal(data.halo_config_file, model, judged), refuses=True)]


def _weights(head: Any, found: ModelConfigReading) -> int | None:
    """The weights' bytes: the index's total_size, else the hub's file list, else the head's
    cached *.safetensors (their sizes in huggingface_hub's tree listing, else on disk once the
    snapshot is complete); None when none says."""
    if found["total_size"]:
        return found["total_size"]
    if found["sizes"]:
        return sum(found["sizes"])
    if found["source"] is None or not found["source"].startswith("/"):
        return None
    fact, kwargs = weights.read(head.data)
    files = cached(head, fact, **kwargs)
    listed = {p: n for p, n in (files["expected"] or {}).items() if _top_safetensors(p)}
    if listed:
        return sum(listed.values())
    present = [n for p, n in files["files"].items() if _top_safetensors(p)]
    return sum(present) if present and complete(files) else None


def _top_safetensors(path: str) -> bool:
    return path.endswith(".safetensors") and "/" not in path


def _why(found: ModelConfigReading, online: bool) -> str:
    if found["source"] is None and online:
        return "neither the head's cache nor the hub answered"
    if found["source"] is None:
        return (
            "config.json is not in the head's cache, and serve.download never or serve.env's "
            "HF_HUB_OFFLINE keeps the hub out"
        )
    if found["error"]:
        return f"{found['source']}: {found['error']}"
    if found["config"] is None:
        return f"{found['source']}: config.json is not a JSON object"
    return f"{found['source']}: the weights' size is in neither the index nor a file list"


def _unknown(model: str, why: str) -> str:
    return (
        f"serve.model {quote(model)}: could not estimate whether it fits ({why}); the deploy "
        "goes on, the memory budget weighs the weights once they are downloaded"
    )


def _fits(model: str, judged: fitestimate.Judged, source: str | None) -> str:
    a = judged.asked
    return (
        f"serve.model {quote(model)} fits at TP {a.tp} x PP {a.pp}: weights "
        f"{gib(a.weights_node)} per node, KV cache {gib(a.kv_needed)} for {a.max_model_len} "
        f"tokens of {gib(a.kv_available)} left per node; largest max_model_len "
        f"{a.largest_len} (config.json from {source})"
    )


def refusal(config_file: str, model: str, judged: fitestimate.Judged) -> str:
    """The one line: the config file, the key, the model and the numbers (the deploy exits 1)."""
    a, s = judged.asked, judged.smallest
    why = (
        f"the weights are more than {WEIGHTS_SHARE:.0%} of vLLM's share"
        if a.weights_node > a.vllm * WEIGHTS_SHARE
        else f"the KV cache is more than the {gib(a.kv_available)} the weights leave"
    )
    smallest = f"TP {s.tp} x PP {s.pp}" if s else f"none on {judged.nodes} node(s)"
    return (
        f"{config_file}: serve.model: {quote(model)} cannot fit at TP {a.tp} x PP {a.pp}: "
        f"weights {gib(a.weights_node)} per node, KV cache {gib(a.kv_needed)} for "
        f"max_model_len {a.max_model_len} x concurrency {a.concurrency}, vLLM may take "
        f"{gib(a.vllm)} per node ({why}); the largest max_model_len that fits: "
        f"{a.largest_len}; the smallest TP x PP that fits: {smallest}; nothing was changed or "
        f"downloaded (halo-cluster fit {quote(model)}; {PAGE})"
    )

"""`halo-cluster fit`'s answer: the model read (fitmodel.py), the estimate at the asked TP x PP
and the smallest that fits (fitestimate.py), as lines or one JSON document."""

from __future__ import annotations

import json
from argparse import Namespace
from dataclasses import dataclass

from halo_cluster.config.model import Cluster
from halo_cluster.decide import fitestimate as fit
from halo_cluster.decide import kvcache
from halo_cluster.decide.budget import gib
from halo_cluster.tools import fitmodel


@dataclass(frozen=True)
class Report:
    model: fitmodel.Model
    att: kvcache.Attention
    asked: fit.Estimate
    smallest: fit.Estimate | None
    nodes: int

    @property
    def fits(self) -> bool:
        return self.asked.fits

    def document(self) -> dict:
        a, s = self.asked, self.smallest
        return {
            "model": self.model.name,
            "source": self.model.source,
            "fits": a.fits,
            "tp": a.tp,
            "pp": a.pp,
            "nodes": self.nodes,
            "weights_bytes": a.weights_total,
            "weights_per_node_bytes": a.weights_node,
            "vllm_bytes": a.vllm,
            "kv_available_bytes": a.kv_available,
            "kv_cache_dtype": self.att.dtype,
            "kv_bytes_per_token": a.kv_per_token,
            "attention": "mla"
            if self.att.mla
            else "sliding+full"
            if self.att.sliding_window
            else "full",
            "sliding_window": self.att.sliding_window,
            "max_model_len": a.max_model_len,
            "concurrency": a.concurrency,
            "kv_needed_bytes": a.kv_needed,
            "largest_max_model_len": a.largest_len,
            "smallest_fit": None if s is None else {"tp": s.tp, "pp": s.pp},
            "problems": list(a.problems),
        }

    def lines(self) -> list[str]:
        a, s = self.asked, self.smallest
        kind = "MLA" if self.att.mla else f"{self.att.kv_heads} KV heads x {self.att.head_size}"
        if self.att.sliding_window:
            kind += f", sliding window {self.att.sliding_window} on some layers"
        out = [
            f"{self.model.name} ({self.model.source}), TP {a.tp} x PP {a.pp} on "
            f"{self.nodes} node(s):",
            f"  weights      {gib(a.weights_total)}, {gib(a.weights_node)} per node",
            f"  vLLM's share {gib(a.vllm)} per node, {gib(a.kv_available)} left for the KV cache",
            f"  KV cache     {a.kv_per_token} bytes per token per node ({kind}, {self.att.dtype})",
            f"  needed       {gib(a.kv_needed)} for {a.concurrency} x {a.max_model_len} tokens",
            f"  largest max_model_len at concurrency {a.concurrency}: {a.largest_len}",
            "  smallest TP x PP that fits: "
            + (f"TP {s.tp} x PP {s.pp}" if s else f"none on {self.nodes} node(s)"),
            "fits" if a.fits else "does not fit: " + " | ".join(a.problems),
        ]
        return out

    def render(self, as_json: bool) -> str:
        return json.dumps(self.document(), indent=2) if as_json else "\n".join(self.lines())


def run(cluster: Cluster, model: str, args: Namespace) -> Report | str:
    """The report, or the one line saying what could not be read."""
    serve = cluster.serve
    try:
        found = fitmodel.read(model)
        judged = fit.judge(
            found.config,
            found.weights,
            model=model,
            extra_args=tuple(serve.extra_args),
            tp=int(args.tp) if args.tp else serve.tensor_parallel_size,
            pp=int(args.pp) if args.pp else serve.pipeline_parallel_size,
            nodes=len(cluster.nodes),
            gtt_bytes=cluster.kernel.gtt_bytes,
            utilization=serve.gpu_memory_utilization,
            max_model_len=int(args.max_model_len) if args.max_model_len else serve.max_model_len,
            concurrency=int(args.concurrency) if args.concurrency else 1,
        )
    except fitmodel.ModelNotFound as error:
        return str(error)
    except kvcache.ModelConfigError as error:
        return f"{model}: {error}"
    return Report(found, judged.att, judged.asked, judged.smallest, len(cluster.nodes))

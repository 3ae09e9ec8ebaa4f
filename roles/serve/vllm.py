"""`vllm serve` on the head: the files its service reads (the quadlet, its start and prestart
scripts, the API key), rendered from Ray's context and the flag table (flags.py)."""

from __future__ import annotations

from pyinfra import host

from halo_cluster.roles.serve import flags
from halo_cluster.roles.serve.ray import render, secret_line

# what Ray may take to place vLLM's GPUs with every node up before the head's Ray is restarted
PLACEMENT_GRACE_SECONDS = 20


def files(ray_context: dict) -> dict[str, str]:
    """Name -> text of every file vLLM's service reads on the head."""
    values = {
        **ray_context,
        "gpus": host.data.halo_serve_gpus,
        "grace": PLACEMENT_GRACE_SECONDS,
        "argv": flags.argv(host.data),  # vllm-start.sh.j2 quotes each word (`sh`)
    }
    return {
        "vllm_unit": render("halo-vllm.container.j2", **values),
        "vllm_start": render("vllm-start.sh.j2", **values),
        "vllm_prestart": render("vllm-prestart.sh.j2", **values),
        "secrets": _secrets(),
    }


def _secrets() -> str:
    """The API key, only on the head (vLLM reads it from its environment)."""
    path = host.data.halo_serve_api_key_file
    return render("secrets.env.j2", api_key=secret_line(path).strip() if path else None)

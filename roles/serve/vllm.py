"""`vllm serve`: the files its service reads (the quadlet, its start script, the head's prestart
script and API key), rendered from Ray's context and the flag table (flags.py). On the head with
Ray; on every node with `serve.launcher: native`, each its rank (the head's with the API)."""

from __future__ import annotations

from pyinfra import host

from halo_cluster.roles.serve import flags
from halo_cluster.roles.serve.ray import launches, render, secret_line

# what Ray may take to place vLLM's GPUs with every node up before the head's Ray is restarted
PLACEMENT_GRACE_SECONDS = 20


def files(ray_context: dict) -> dict[str, str]:
    """Name -> text of every file vLLM's service reads on this node."""
    values = {
        **ray_context,
        "gpus": host.data.halo_serve_gpus,
        "grace": PLACEMENT_GRACE_SECONDS,
        "argv": flags.argv(host.data),  # the start scripts quote each word (`sh`)
    }
    unit = render("halo-vllm.container.j2", **values)
    if not launches(host.data):
        found = {"vllm_unit": unit, "vllm_start": render("vllm-rank-start.sh.j2", **values)}
        return found | ({"secrets": _secrets()} if host.data.halo_role == "head" else {})
    return {
        "vllm_unit": unit,
        "vllm_start": render("vllm-start.sh.j2", **values),
        "vllm_prestart": render("vllm-prestart.sh.j2", **values),
        "secrets": _secrets(),
    }


def _secrets() -> str:
    """The API key, only on the head (vLLM reads it from its environment)."""
    path = host.data.halo_serve_api_key_file
    return render("secrets.env.j2", api_key=secret_line(path).strip() if path else None)

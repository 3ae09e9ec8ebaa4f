"""`vllm serve`: the files its service reads (the quadlet, its start script, the head's prestart
script and API key), rendered from Ray's context and the flag table (flags.py). On the head with
Ray; on every node with `serve.launcher: native`, each its rank (the head's with the API)."""

from __future__ import annotations

import ipaddress
import json
from dataclasses import asdict
from pathlib import Path

from pyinfra import host

from halo_cluster.config.lock import HISTORY
from halo_cluster.config.serving import SECRETS_ENV, WARMUP_COMPLETION_SECONDS
from halo_cluster.roles.serve import enginestart, flags, metricsfence, warmup
from halo_cluster.roles.serve.files import VLLM, WARMUP, paths
from halo_cluster.roles.serve.ray import launches, render, secret_line

# what Ray may take to place vLLM's GPUs with every node up before the head's Ray is restarted
PLACEMENT_GRACE_SECONDS = 20
# where vLLM's container finds the fence of /metrics (the start script puts it on PYTHONPATH)
FENCE_DIR = "/usr/local/lib/halo-cluster/python"
WARMUP_MARGIN_SECONDS = 60  # the warm-up unit's start bound beyond the program's own


def files(ray_context: dict) -> dict[str, str]:
    """Name -> text of every file vLLM's service reads on this node."""
    values = {
        **ray_context,
        "gpus": host.data.halo_serve_gpus,
        "grace": PLACEMENT_GRACE_SECONDS,
        "argv": flags.argv(host.data),  # the start scripts quote each word (`sh`)
        "fence": _fence(),
        "warmup": WARMUP if host.data.halo_role == "head" else "",  # the API's node only
    }
    unit = render("halo-vllm.container.j2", **values)
    fence = {"metrics_fence": Path(metricsfence.__file__).read_text()} if values["fence"] else {}
    engine = {"engine_env": enginestart.env_file()}  # either launcher: the API server's bound
    if not launches(host.data):
        found = {"vllm_unit": unit, "vllm_start": render("vllm-rank-start.sh.j2", **values)}
        head = host.data.halo_role == "head"
        secrets = {"secrets": _secrets(), **_warmup()} if head else {}
        return found | engine | fence | secrets
    return {
        "vllm_unit": unit,
        "vllm_start": render("vllm-start.sh.j2", **values),
        "vllm_prestart": render("vllm-prestart.sh.j2", **values),
        "secrets": _secrets(),
        **engine,
        **fence,
        **_warmup(),
    }


def _warmup() -> dict[str, str]:
    """The head's warm-up after each start of vLLM: its unit, program and settings."""
    data = host.data
    settings = warmup.Settings(
        url=data.halo_serve_head_url,
        models=[data.halo_serve_served_model_name],
        secrets=SECRETS_ENV,
        history=HISTORY,
        # the engine's own start bound: vLLM gives up after it, and a deploy's or an upgrade's
        # shorter wait (serve.ready_timeout) changes no file of a running cluster
        ready_seconds=enginestart.for_node(),
        completion_seconds=WARMUP_COMPLETION_SECONDS,
    )
    where = paths()
    unit = render(
        "halo-warmup.service.j2",
        node=data.halo_node,
        user=data.halo_cluster_user,
        vllm=VLLM,
        max_tokens=warmup.MAX_TOKENS,
        program=where["warmup_program"],
        settings=where["warmup_settings"],
        timeout=warmup.bound(settings) + WARMUP_MARGIN_SECONDS,
    )
    return {
        "warmup_unit": unit,
        "warmup_program": Path(warmup.__file__).read_text(),
        "warmup_settings": json.dumps(asdict(settings), indent=1, sort_keys=True) + "\n",
    }


def _fence() -> dict[str, str] | None:
    """With `serve.listen: all`, on the node serving the API: where the fence of /metrics is
    mounted, its file, and the networks it lets in without the key (the data link's subnet)."""
    data = host.data
    if not flags.fenced(data):
        return None
    subnet = ipaddress.ip_interface(f"{data.halo_data_address}/{data.halo_data_prefix}").network
    module = flags.FENCE_CLASS.rpartition(".")[0]
    return {
        "dir": FENCE_DIR,
        "file": f"{FENCE_DIR}/{module}.py",
        "variable": metricsfence.NETWORKS,
        "networks": str(subnet),
    }


def _secrets() -> str:
    """The API key, only on the head (vLLM reads it from its environment)."""
    path = host.data.halo_serve_api_key_file
    return render("secrets.env.j2", api_key=secret_line(path).strip() if path else None)

"""The serve role's typed values: the `serve:` section as `Serve`, derived from its keys and the
cluster (its node count, its link), and the secret files it names, made and checked on the
controller when cluster.yml is loaded."""

from __future__ import annotations

import os
import secrets
from dataclasses import dataclass, replace
from pathlib import Path

from halo_cluster.config.loader import check_secret
from halo_cluster.config.model import Cluster, Problems, resolve

# Ray's cluster token when `serve.ray_token_file` is not given: made once by `prepare`
DEFAULT_RAY_TOKEN = ".halo-cluster/ray-token"
# RCCL's transport between the nodes (`serve.transport`) when cluster.yml names none
DEFAULT_TRANSPORTS = {"roce": "rdma", "thunderbolt": "sockets"}
SECRET_FILES = ("api_key_file", "hf_token_file", "ray_token_file")


@dataclass(frozen=True)
class Serve:
    """The `serve:` section: Ray on every node, `vllm serve` on the head (docs/roles/serve.md).

    No field has a default: `derive` sets each from the document or the schema's default."""

    enabled: bool
    model: str | None
    served_model_name: str | None
    tensor_parallel_size: int
    pipeline_parallel_size: int
    port: int
    listen: str
    api_key_file: str | None
    hf_token_file: str | None
    ray_token_file: str | None
    gpu_memory_utilization: float
    max_model_len: int | None
    max_num_seqs: int | None
    enforce_eager: bool
    extra_args: tuple[str, ...]
    env: dict[str, str]
    ready_timeout: int
    wait: bool
    nccl_debug: bool
    download: str
    object_store_mib: int | None
    transport: str

    @property
    def gpus(self) -> int:
        return self.tensor_parallel_size * self.pipeline_parallel_size


def derive(cluster: Cluster, problems: Problems, base_dir: Path) -> Serve:
    serve = _from_keys(cluster, base_dir)
    if serve.transport == "rdma" and cluster.interconnect == "thunderbolt":
        problems.error(
            "serve.transport",
            "rdma needs interconnect: roce (thunderbolt has no RDMA): use sockets",
        )
    if serve.enabled:
        _check_enabled(serve, len(cluster.nodes), problems)
    return serve


def _from_keys(cluster: Cluster, base_dir: Path) -> Serve:
    """Every field from its key, as written or the schema's default, with what is derived."""
    values = {name: cluster.settings[f"serve.{name}"] for name in Serve.__dataclass_fields__}
    values["ray_token_file"] = values["ray_token_file"] or DEFAULT_RAY_TOKEN
    return replace(
        Serve(**values),
        **{name: resolve(values[name], base_dir) for name in SECRET_FILES},
        tensor_parallel_size=values["tensor_parallel_size"] or len(cluster.nodes),
        served_model_name=values["served_model_name"] or values["model"],
        transport=values["transport"] or DEFAULT_TRANSPORTS[cluster.interconnect],
        extra_args=tuple(values["extra_args"]),
        env=dict(values["env"]),
    )


def _check_enabled(serve: Serve, node_count: int, problems: Problems) -> None:
    if not serve.model:
        problems.error("serve.model", "required when serve.enabled is true")
    if serve.gpus != node_count:
        problems.error(
            "serve.tensor_parallel_size",
            f"TP {serve.tensor_parallel_size} x PP {serve.pipeline_parallel_size} = "
            f"{serve.gpus} GPUs, but the cluster has {node_count} nodes with one GPU each: "
            "TP x PP must equal the number of nodes",
        )
    if serve.model and serve.model.startswith("/") and serve.download != "never":
        problems.warn(
            "serve.download",
            f"{serve.download}: nothing is fetched or copied for a model given as a path "
            f"({serve.model}): every node must hold it there (checked); `never` says so",
        )
    if serve.listen == "all" and not serve.api_key_file:
        problems.error("serve.api_key_file", "required with serve.listen: all (every address)")


def prepare(cluster: Cluster, problems: Problems, base_dir: Path) -> None:
    """Ray's token made when none is named, then every secret file checked, when serving."""
    ensure_ray_token(cluster, base_dir)
    serve = cluster.serve
    for name in SECRET_FILES:
        path = getattr(serve, name)
        if serve.enabled and path:
            check_secret(f"serve.{name}", path, problems)


def ensure_ray_token(cluster: Cluster, base_dir: Path) -> None:
    """Ray's cluster token when the config names none: made once on the controller (0600 in a
    0700 folder) and kept, so that every run gives the nodes the same token."""
    path = (base_dir / DEFAULT_RAY_TOKEN).resolve()
    if not cluster.serve.enabled or cluster.serve.ray_token_file != str(path) or path.exists():
        return
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w") as token:
        token.write(secrets.token_hex(32) + "\n")

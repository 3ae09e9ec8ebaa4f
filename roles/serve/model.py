"""The serve role's typed values: the `serve:` section as `Serve`, derived from its keys and the
cluster (its node count, its link), and the secret files it names, made and checked on the
controller when cluster.yml is loaded."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from halo_cluster.config import state
from halo_cluster.config.derive import resolve
from halo_cluster.config.filecheck import check_secret
from halo_cluster.config.model import Cluster, Problems
from halo_cluster.config.schema import section_type
from halo_cluster.roles.serve.schema import SECTION

# Ray's cluster token when `serve.ray_token_file` is not given: made by the first deploy, in the
# state folder (config/state.py)
RAY_TOKEN = "ray-token"
# RCCL's transport between the nodes (`serve.transport`) when cluster.yml names none
DEFAULT_TRANSPORTS = {"roce": "rdma", "thunderbolt": "sockets"}
SECRET_FILES = ("api_key_file", "hf_token_file", "ray_token_file")


# the `serve:` section as typed values, one field per key (docs/roles/serve.md), built from the
# schema: a key added there is a field here
Serve = section_type("Serve", SECTION)


@dataclass(frozen=True)
class Serving(Serve):  # type: ignore[misc,valid-type]
    """`cluster.serve`: the section's keys, then what the cluster derives from them, each here
    only (host data `halo_serve_FIELD`, read by the roles and the tools)."""

    gpus: int  # TP x PP: one GPU per node
    parallelism: str  # `TP 2 x PP 1`: how vLLM splits the model, as the checks name it
    bind_address: str  # vLLM's --host: the head's data address with `listen: data`
    head_url: str  # vLLM's URL as the head reaches it (the deploy's /health wait, status)
    url: str  # vLLM's URL from the controller: the head's SSH host with `listen: all`
    exposed_port: int | None  # vLLM's port the head opens on its management side, if any
    ray_listens: bool  # Ray's ports are open on every node (the cluster serves on Ray)
    object_store_reserved_mib: int | None  # the object store Ray is given, when serving on Ray
    executor_backend: str  # vLLM's --distributed-executor-backend: `ray`, or `mp` with native
    nnodes: int  # the nodes vLLM spans: `--nnodes` with `launcher: native`
    master_addr: str  # where the native ranks meet (`--master-addr`): the head's data address
    master_port_listens: int | None  # the head's rendezvous port, open when serving natively
    ray_token_owned: bool  # no `ray_token_file` given: the tool's, rotated when a node leaves


def derive(cluster: Cluster, problems: Problems, base_dir: Path) -> Serving:
    serve = _with_derived(_from_keys(cluster, base_dir), cluster)
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
    values["ray_token_file"] = values["ray_token_file"] or str(state.folder(base_dir) / RAY_TOKEN)
    return replace(
        Serve(**values),
        **{name: resolve(values[name], base_dir) for name in SECRET_FILES},
        tensor_parallel_size=values["tensor_parallel_size"] or len(cluster.nodes),
        served_model_name=values["served_model_name"] or values["model"],
        transport=values["transport"] or DEFAULT_TRANSPORTS[cluster.interconnect],
        extra_args=tuple(values["extra_args"]),
        env=dict(values["env"]),
    )


def _with_derived(serve: Serve, cluster: Cluster) -> Serving:
    # no head: a node's problem the loader reports already (the addresses are then never read)
    head = next((n for n in cluster.nodes if n.role == "head"), None)
    address, ssh_host = (head.address, head.ssh_host) if head else ("", "")
    data = serve.listen == "data"
    ray = serve.launcher == "ray"
    keys = {name: getattr(serve, name) for name in Serve.__dataclass_fields__}
    return Serving(
        **keys,
        gpus=serve.tensor_parallel_size * serve.pipeline_parallel_size,
        parallelism=f"TP {serve.tensor_parallel_size} x PP {serve.pipeline_parallel_size}",
        bind_address=address if data else "0.0.0.0",
        head_url=f"http://{address if data else '127.0.0.1'}:{serve.port}",
        url=f"http://{address if data else ssh_host}:{serve.port}",
        exposed_port=serve.port if serve.enabled and not data else None,
        ray_listens=serve.enabled and ray,
        object_store_reserved_mib=serve.object_store_mib if serve.enabled and ray else None,
        executor_backend="ray" if ray else "mp",
        nnodes=len(cluster.nodes),
        master_addr=address,
        master_port_listens=serve.master_port if serve.enabled and not ray else None,
        ray_token_owned=cluster.settings["serve.ray_token_file"] is None,
    )


def _check_enabled(serve: Serving, node_count: int, problems: Problems) -> None:
    if not serve.model:
        problems.error("serve.model", "required when serve.enabled is true")
    if serve.gpus != node_count:
        # from a recipe unless written: `models` names the recipes this cluster has
        recipe = f" (serve.recipe {serve.recipe}: see halo-cluster models)" if serve.recipe else ""
        problems.error(
            "serve.tensor_parallel_size",
            f"{serve.parallelism} = {serve.gpus} GPUs, but the cluster has {node_count} nodes "
            f"with one GPU each: TP x PP must equal the number of nodes{recipe}",
        )
    if serve.model and serve.model.startswith("/") and serve.download != "never":
        problems.warn(
            "serve.download",
            f"{serve.download}: nothing is fetched or copied for a model given as a path "
            f"({serve.model}): every node must hold it there (checked); `never` says so",
        )
    if serve.listen == "all" and not serve.api_key_file:
        problems.error("serve.api_key_file", "required with serve.listen: all (every address)")
    if serve.launcher == "native" and serve.master_port == serve.port:
        problems.error(
            "serve.master_port", f"{serve.master_port} is serve.port: choose another port"
        )


def prepare(cluster: Cluster, problems: Problems, base_dir: Path) -> None:
    """Every secret file checked, when serving: the tool's own Ray token only once a deploy
    made it (roles/serve/controller.py: loading the config writes nothing). A token file the
    user gave is never rewritten: a node leaving is a warning naming it."""
    serve = cluster.serve
    if cluster.container_leaving and not serve.ray_token_owned:
        problems.warn(
            "serve.ray_token_file",
            f"{', '.join(cluster.container_leaving)} left the cluster: {serve.ray_token_file} is "
            "yours and never rewritten; write a new token into it, or a node that could not be "
            "reached can rejoin",
        )
    for name in SECRET_FILES:
        path = getattr(serve, name)
        made_by_the_deploy = name == "ray_token_file" and serve.ray_token_owned
        if serve.enabled and path and not (made_by_the_deploy and not Path(path).exists()):
            check_secret(f"serve.{name}", path, problems)

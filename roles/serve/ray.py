"""Ray on every node: the files its service reads (the quadlet, the start script, serve.env, the
cluster's token), and the values the quadlets and scripts of both services render from. With
`serve.launcher: native` only what vLLM's ranks share with it (serve.env, the model, the Hugging
Face token): no Ray file."""

from __future__ import annotations

from pathlib import Path

from pyinfra import host

from halo_cluster.config.serving import NODE_PORTS, PORTS, SERVICE_CONFIG
from halo_cluster.node import image as cluster_image
from halo_cluster.node import toolbox as toolbox_files
from halo_cluster.node.context import NodeContext
from halo_cluster.node.environment import environment_values
from halo_cluster.node.render import templates
from halo_cluster.roles.serve import controller, flags, weights
from halo_cluster.roles.serve.files import paths

render = templates(__package__)  # templates/serve/: the role's package names it
# per-node values vLLM must not copy from the head to the workers' Ray processes
NON_CARRY_OVER = ("NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME", "NCCL_IB_HCA", "VLLM_ROCE_HCA")
# a worker's Ray gives up on a lost head after this (Ray's default: 60 s), and systemd restarts it.
# With no external store for the GCS a head whose Ray restarted is a new cluster that a waiting
# worker cannot rejoin, and vLLM's engine has died with it: waiting longer only delays recovery
GCS_RECONNECT_SECONDS = 10
# where vLLM's driver and the GPU worker on its node meet (VLLM_RPC_BASE_PATH), in both containers
RPC_DIR = "/run/halo-cluster/vllm-rpc"
# podman's wait from SIGTERM to SIGKILL when Ray stops. With --pid=host every process of the
# container gets SIGTERM at once: the head's own GCS is gone when `ray start --block` drains, and
# the drain would only wait out GCS_RECONNECT_SECONDS (21 s measured in the lab when it was 20).
# A worker drains through the head's GCS in about 1 s while that is up (the deploy stops workers
# first).
STOP_SECONDS = {"head": 3, "worker": 10}
WAIT_SECONDS = 600  # what a service waits for its prerequisites before failing (then retried)
# rootless podman options RCCL over RDMA needs, as upstream's refresh_toolbox.sh and run_cluster.sh
# (host IPC also gives the host's /dev/shm: podman refuses --shm-size with it)
# --pid=host: a Ray driver (vLLM) finds its node's raylet by looking for its process
PODMAN_ARGS = (
    "--ipc=host",
    "--pid=host",
    "--group-add=keep-groups",
    "--security-opt=seccomp=unconfined",
)


def context(node: NodeContext, env: str) -> dict:
    """What the quadlets and scripts of both services render from."""
    data = host.data
    return {
        "node": data.halo_node,
        "role": data.halo_role,
        "user": data.halo_cluster_user,
        "image": cluster_image.pinned(host),
        "model": data.halo_serve_model,
        "node_ip": data.halo_data_address,
        "head_ip": data.halo_head_address,
        "config": SERVICE_CONFIG,
        "files": paths(),
        "podman_args": list(PODMAN_ARGS),
        "devices": _devices(node),
        "memlock": node.has_infiniband,
        "ports": PORTS,
        "node_ports": NODE_PORTS,
        "wait": WAIT_SECONDS,
        "stop_seconds": STOP_SECONDS[data.halo_role],
        "object_store_mib": data.halo_serve_object_store_mib,
        "ray": launches(data),
        "rank": flags.node_rank(data),
        "nnodes": data.halo_serve_nnodes,
        "master_port": data.halo_serve_master_port,
        "rpc_dir": RPC_DIR,
        "hf_token": data.halo_serve_hf_token_file is not None,
        "pinned": env_names(env),
    }


def files(node: NodeContext) -> tuple[dict[str, str], dict]:
    """Name -> text of every file Ray's service reads on this node (with native, those the
    ranks share with it), and the render context."""
    data = host.data
    env = environment(node)
    values = context(node, env)
    ray = launches(data)
    wanted = {
        "ray_unit": render("halo-ray.container.j2", **values) if ray else None,
        "ray_start": render("ray-start.sh.j2", **values) if ray else None,
        "env": env,
        # in vLLM's config folder (VLLM_CONFIG_ROOT), which its quadlet mounts with either launcher
        "non_carry_over": render("ray_non_carry_over_env_vars.json.j2", names=NON_CARRY_OVER),
        "model": f"{data.halo_serve_model}\n",
        "ray_token": controller.ray_token(data) if ray else None,  # the one this run writes
    }
    wanted = {name: text for name, text in wanted.items() if text is not None}
    if data.halo_serve_hf_token_file:
        wanted["hf_token"] = secret_line(data.halo_serve_hf_token_file)
    return wanted, values


def environment(node: NodeContext) -> str:
    """serve.env: the environment of both containers on this node."""
    return render(
        "serve.env.j2",
        **environment_values(node),
        gcs_port=PORTS["port"],
        gcs_reconnect_seconds=GCS_RECONNECT_SECONDS,
        rpc_dir=RPC_DIR,
        hf_token=host.data.halo_serve_hf_token_file is not None,
        ray=launches(host.data),
        env=dict(host.data.halo_serve_env),
        nccl_debug=host.data.halo_serve_nccl_debug,
        transport=host.data.halo_serve_transport,
        offline=weights.offline(host.data),
    )


def launches(data) -> bool:
    """Whether Ray runs on the nodes (`serve.launcher: ray`)."""
    return data.halo_serve_launcher == "ray"


def env_names(env: str) -> list[str]:
    """The variables an environment file sets."""
    return [line.split("=", 1)[0] for line in env.splitlines() if "=" in line and line[0] != "#"]


def secret_line(path: str) -> str:
    """A secret file's one line, read on the controller at deploy time: never host data."""
    return Path(path).read_text().strip() + "\n"


def _devices(node: NodeContext) -> list[str]:
    devices = list(toolbox_files.GPU_DEVICES)
    return [*devices, "/dev/infiniband"] if node.has_infiniband else devices

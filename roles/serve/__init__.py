"""Cluster services: Ray on every node and `vllm serve` on the head, as rootless podman quadlets
of the lingering cluster user, started at boot by the user's systemd; on `serve.enabled: false`
stopped and removed."""

from __future__ import annotations

import shlex
from collections.abc import Callable
from pathlib import Path

from pyinfra import host, logger
from pyinfra.api import deploy
from pyinfra.context import ctx_state
from pyinfra.operations import server

from halo_cluster.config.serving import NODE_PORTS, PORTS
from halo_cluster.decide.safety import e810_ports
from halo_cluster.node import toolbox as toolbox_files
from halo_cluster.node.context import NodeContext
from halo_cluster.node.environment import environment_values
from halo_cluster.node.groups import device_groups
from halo_cluster.node.nodefiles import cached, node_files
from halo_cluster.node.operations import text_file
from halo_cluster.node.render import templates
from halo_cluster.node.report import events, fail
from roles.serve import budget, weights
from roles.serve.facts import HttpStatus, RdmaLinks, UserManager, UserUnits
from roles.serve.services import (
    remove_user_services,
    user_systemctl,
    wait_for_health,
)
from roles.serve.transport import rdma_port_problem
from roles.serve.usermanager import needs_reexec, stale_because

render = templates(__name__)  # roles/serve/templates/
VLLM_FILES = ("vllm_unit", "vllm_start", "vllm_prestart", "secrets")  # the head's, vLLM's own

ORDER = 95  # after the reboot role: a cluster ends its deploy serving, not rebooting
PACKAGES = ("curl", "rsync")  # rsync: the model copied from the head (serve.download: once)
UNITS = ".config/containers/systemd"
CONFIG = ".config/halo-cluster"
RAY, VLLM = "halo-ray", "halo-vllm"
# per-node values vLLM must not copy from the head to the workers' Ray processes
NON_CARRY_OVER = ("NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME", "NCCL_IB_HCA", "VLLM_ROCE_HCA")
SECRETS = ("secrets", "ray_token", "hf_token")  # never shown in a diff or the log
# what Ray may take to place vLLM's GPUs with every node up before the head's Ray is restarted
PLACEMENT_GRACE_SECONDS = 20
# a worker's Ray gives up on a lost head after this (Ray's default: 60 s), and systemd restarts it
GCS_RECONNECT_SECONDS = 20
# where vLLM's driver and the GPU worker on its node meet (VLLM_RPC_BASE_PATH), in both containers
RPC_DIR = "/run/halo-cluster/vllm-rpc"
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


def files(data) -> dict[str, str]:
    """Name -> path below the user's home of every file this role may write."""
    return {
        "ray_unit": f"{UNITS}/{RAY}.container",
        "vllm_unit": f"{UNITS}/{VLLM}.container",
        "ray_start": f"{CONFIG}/ray-start.sh",
        "vllm_start": f"{CONFIG}/vllm-start.sh",
        "vllm_prestart": f"{CONFIG}/vllm-prestart.sh",
        "env": f"{CONFIG}/serve.env",
        "secrets": f"{CONFIG}/secrets.env",
        "ray_token": f"{CONFIG}/ray-token",
        "hf_token": f"{CONFIG}/hf-token",
        "non_carry_over": f"{CONFIG}/vllm/ray_non_carry_over_env_vars.json",
        "model": f"{CONFIG}/model",
    }


# any user's quadlets of ours: what an earlier cluster_user left running (removed as leftovers)
ANY_USERS_UNITS = tuple(f"/home/*/{UNITS}/{service}.container" for service in (RAY, VLLM))


def paths(data) -> tuple[str, ...]:
    own = tuple(f"~{data.halo_cluster_user}/{p}" for p in files(data).values())
    return (*own, *ANY_USERS_UNITS)


def reads(data) -> tuple[tuple[type, dict], ...]:
    """The user's manager and services, and on a waiting head vLLM's /health: what a serving
    node reads (the /health answer only when nothing was started, a no-op's case)."""
    if not data.halo_serve_enabled:
        return ()
    user = data.halo_cluster_user
    found = ((UserManager, {"user": user}), (UserUnits, {"user": user, "units": (RAY, VLLM)}))
    found += (budget.read(data),)  # MemTotal, GTT, the model's weights: the memory budget
    found += (weights.read(data),)  # the model's files: copied, fetched or checked
    if data.halo_role == "head" and data.halo_serve_wait:
        found += ((HttpStatus, {"url": f"{health_url(data)}/health"}),)
    if data.halo_serve_transport == "rdma":
        found += ((RdmaLinks, {}),)
    return found


def health_url(data) -> str:
    """Where vLLM answers on the head, as the head reaches it."""
    listen = data.halo_head_address if data.halo_serve_listen == "data" else "127.0.0.1"
    return f"http://{listen}:{data.halo_serve_port}"


@deploy("Cluster services")
def apply(node: NodeContext) -> None:
    user = host.data.halo_cluster_user
    snapshot = node_files(host)
    home = snapshot.home(user) or f"/home/{user}"
    where = {name: f"{home}/{path}" for name, path in files(host.data).items()}
    _remove_other_users_services(user, snapshot)
    if not host.data.halo_serve_enabled:
        _remove(user, snapshot, list(where.values()), [VLLM, RAY], "the cluster services")
        return
    head = host.data.halo_role == "head"
    port_refused = _rdma_port_refused(node)  # a refused node runs Ray, never vLLM
    # every node's memory budget and model, on the head before vLLM starts: refused, vLLM's
    # files are left as they are and it is neither started nor restarted (docs/roles/serve.md)
    over_budget = budget.check() if head else []
    absent = weights.missing() if head else []
    fits = not (over_budget or absent or port_refused)
    wanted = _wanted_files(node, head)
    if not fits:
        wanted = {name: v for name, v in wanted.items() if name not in VLLM_FILES}
    changed = _write_files(user, snapshot, where, wanted)
    unwanted = [where[n] for n in where if n not in wanted and (fits or n not in VLLM_FILES)]
    _remove(user, snapshot, unwanted, [] if head else [VLLM], "what this node no longer runs")
    if not over_budget:  # a refused model is neither fetched nor copied
        weights.fetch(changed["model"])
    restarted = _refresh_user_manager(user, snapshot)
    if over_budget:
        fail(host, budget.refusal(over_budget))
    if absent:
        fail(host, weights.refusal(absent))
    vllm = head and fits
    acted = _start_or_restart(user, vllm, changed) or restarted
    if vllm and host.data.halo_serve_wait:
        _wait_until_serving(acted or any(changed.values()))


def _rdma_port_refused(node: NodeContext) -> bool:
    """With `serve.transport: rdma`, a data port without an ACTIVE RDMA device fails the node
    (one line: the port and the fix); True then. Where this run loads the E810 drivers, the
    state read before is not the one vLLM sees: only a warning (RCCL's pin still fails loudly)."""
    if host.data.halo_serve_transport != "rdma":
        return False
    loading = bool(e810_ports(node.interfaces)) and not {"ice", "irdma"} <= set(node.loaded_modules)
    if loading:
        logger.warning(
            f"{host.print_prefix}the E810 drivers load in this run: the RDMA port is checked "
            "on the next run (NCCL_NET=IB fails vLLM's start if it is not ACTIVE)"
        )
    interface = node.interface or host.data.halo_data_interface
    links = cached(host, RdmaLinks)
    problem = rdma_port_problem(interface, node.rdma_device, links, drivers_loading=loading)
    if problem:
        fail(host, problem)
    return problem is not None


def _write_files(
    user: str, snapshot, where: dict[str, str], wanted: dict[str, tuple[str, str]]
) -> dict[str, bool]:
    """Write every wanted file; which of them change."""
    changed = {}
    for name, (text, mode) in wanted.items():
        changed[name] = snapshot.differs(where[name], text, mode)
        text_file(
            name=f"{'Secrets' if name in SECRETS else 'Service file'} {where[name]}",
            path=where[name],
            text=text,
            mode=mode,
            owner=user,
            secret=name in SECRETS,
        )
    return changed


def _remove(user: str, snapshot, paths: list[str], services: list[str], what: str) -> None:
    """Stop `services` and remove those of `paths` that exist (nothing when none does)."""
    present = [path for path in paths if snapshot.exists(path)]
    if present:
        remove_user_services(
            name=f"Stop and remove {what}", user=user, services=services, paths=present
        )


def _remove_other_users_services(user: str, snapshot) -> None:
    """Another user's Ray or vLLM of ours (an earlier `cluster_user`) would hold Ray's ports and
    answer /health in place of the configured cluster: stop it and remove its files. Its
    lingering and its other files stay: they are that user's."""
    own = snapshot.home(user) or f"/home/{user}"
    homes = {
        path.split(f"/{UNITS}/")[0]
        for path in snapshot.files
        if path.endswith(".container") and f"/{UNITS}/halo-" in path
    }
    for home in sorted(homes - {own}):
        other = snapshot.user_of_home(home)
        if other:
            remove_user_services(
                name=f"Stop and remove {other}'s cluster services (cluster_user is {user})",
                user=other,
                services=[VLLM, RAY],
                paths=[f"{home}/{path}" for path in files(host.data).values()],
            )


def _wanted_files(node: NodeContext, head: bool) -> dict[str, tuple[str, str]]:
    """Name -> (text, mode) of every file this node needs."""
    data = host.data
    env = _environment(node)
    ray_ctx = {
        "node": data.halo_node,
        "role": data.halo_role,
        "user": data.halo_cluster_user,
        "image": data.halo_image,
        "model": data.halo_serve_model,
        "node_ip": data.halo_data_address,
        "head_ip": data.halo_head_address,
        "podman_args": list(PODMAN_ARGS),
        "devices": _devices(node),
        "memlock": node.has_infiniband,
        "ports": PORTS,
        "node_ports": NODE_PORTS,
        "wait": WAIT_SECONDS,
        "object_store_mib": data.halo_serve_object_store_mib,
        "rpc_dir": RPC_DIR,
        "hf_token": data.halo_serve_hf_token_file is not None,
        "pinned": env_names(env),
    }
    wanted = {
        "ray_unit": (render("halo-ray.container.j2", **ray_ctx), "644"),
        "ray_start": (render("ray-start.sh.j2", **ray_ctx), "755"),
        "env": (env, "600"),  # the user's serve.env values may be secrets of theirs
        "non_carry_over": (
            render("ray_non_carry_over_env_vars.json.j2", names=NON_CARRY_OVER),
            "644",
        ),
        "model": (f"{data.halo_serve_model}\n", "644"),
        "ray_token": (_secret_line(data.halo_serve_ray_token_file), "600"),
    }
    if data.halo_serve_hf_token_file:
        wanted["hf_token"] = (_secret_line(data.halo_serve_hf_token_file), "600")
    if head:
        vllm_ctx = {
            **ray_ctx,
            "gpus": _gpus(),
            "grace": PLACEMENT_GRACE_SECONDS,
            "argv": argv(),  # vllm-start.sh.j2 quotes each word (`sh`)
        }
        wanted["vllm_unit"] = (render("halo-vllm.container.j2", **vllm_ctx), "644")
        wanted["vllm_start"] = (render("vllm-start.sh.j2", **vllm_ctx), "755")
        wanted["vllm_prestart"] = (render("vllm-prestart.sh.j2", **vllm_ctx), "755")
        wanted["secrets"] = (_secrets(), "600")
    return wanted


def env_names(env: str) -> list[str]:
    """The variables an environment file sets."""
    return [line.split("=", 1)[0] for line in env.splitlines() if "=" in line and line[0] != "#"]


def _devices(node: NodeContext) -> list[str]:
    devices = list(toolbox_files.GPU_DEVICES)
    return [*devices, "/dev/infiniband"] if node.has_infiniband else devices


def _gpus() -> int:
    return host.data.halo_serve_tensor_parallel_size * host.data.halo_serve_pipeline_parallel_size


def argv() -> list[str]:
    """`vllm serve` arguments, each a plain word (every value passed its rule)."""
    data = host.data
    listen = data.halo_head_address if data.halo_serve_listen == "data" else "0.0.0.0"
    args = [
        data.halo_serve_model,
        f"--host={listen}",
        f"--port={data.halo_serve_port}",
        f"--served-model-name={data.halo_serve_served_model_name}",
        f"--tensor-parallel-size={data.halo_serve_tensor_parallel_size}",
        f"--pipeline-parallel-size={data.halo_serve_pipeline_parallel_size}",
        "--distributed-executor-backend=ray",
        f"--gpu-memory-utilization={data.halo_serve_gpu_memory_utilization}",
    ]
    if data.halo_serve_max_model_len:
        args.append(f"--max-model-len={data.halo_serve_max_model_len}")
    if data.halo_serve_max_num_seqs:
        args.append(f"--max-num-seqs={data.halo_serve_max_num_seqs}")
    if data.halo_serve_enforce_eager:
        args.append("--enforce-eager")
    return [*args, *data.halo_serve_extra_args]


def _environment(node: NodeContext) -> str:
    values = environment_values(node)
    return render(
        "serve.env.j2",
        **values,
        gcs_port=PORTS["port"],
        gcs_reconnect_seconds=GCS_RECONNECT_SECONDS,
        rpc_dir=RPC_DIR,
        hf_token=host.data.halo_serve_hf_token_file is not None,
        env=dict(host.data.halo_serve_env),
        nccl_debug=host.data.halo_serve_nccl_debug,
        transport=host.data.halo_serve_transport,
        offline=weights.offline(host.data),
    )


def _secret_line(path: str) -> str:
    """A secret file's one line, read on the controller at deploy time: never host data."""
    return Path(path).read_text().strip() + "\n"


def _secrets() -> str:
    """The API key, only on the head (vLLM reads it from its environment)."""
    path = host.data.halo_serve_api_key_file
    return render("secrets.env.j2", api_key=_secret_line(path).strip() if path else None)


def _refresh_user_manager(user: str, snapshot) -> bool:
    """Restart the user's systemd manager (and with it the services) when it runs without the
    groups or the locked-memory limit this deploy gives the user: it reads them only when it
    starts, and a node whose kernel arguments are right is never rebooted."""
    manager = cached(host, UserManager, user=user)
    memlock = host.data.halo_interconnect == "roce"
    gids = snapshot.group_ids()
    wanted = [gids[g] for g in device_groups(host.data.halo_interconnect) if g in gids]
    if needs_reexec(manager, memlock):
        server.shell(
            name="Reload systemd's default limits (daemon-reexec)",
            commands=["systemctl daemon-reexec"],
        )
    why = stale_because(manager, wanted, memlock)
    if why:
        logger.info(f"{host.print_prefix}{user}'s systemd manager restarts: {why}")
        server.shell(
            name=f"Restart {user}'s systemd manager (groups and limits)",
            commands=[f"systemctl restart user@$(id -u {shlex.quote(user)}).service"],
        )
    return why is not None


def _start_or_restart(user: str, head: bool, changed: dict[str, bool]) -> bool:
    """Start what is not running, restart what changed; True when anything was."""
    units = cached(host, UserUnits, user=user, units=(RAY, VLLM))
    if changed["ray_unit"] or changed.get("vllm_unit"):
        user_systemctl(name="Reload the user's units", user=user, args=["daemon-reload"])
    ray_inputs = ("ray_unit", "ray_start", "env", "non_carry_over", "ray_token", "hf_token")
    ray_changed = any(changed.get(n) for n in ray_inputs)
    acted = _ensure(user, RAY, ray_changed, units.get(RAY))
    if head:
        vllm_inputs = ("vllm_unit", "vllm_start", "vllm_prestart", "secrets", "hf_token")
        vllm_changed = ray_changed or any(changed.get(n) for n in vllm_inputs)
        acted = _ensure(user, VLLM, vllm_changed, units.get(VLLM)) or acted
    return acted


def _ensure(user: str, service: str, changed: bool, state: str | None) -> bool:
    running = state in ("active", "activating", "reloading")
    verb = "restart" if changed and running else "start" if not running else None
    if verb:
        # blocking: returns once the old container is gone and the new one runs, so the wait
        # for /health that follows cannot be answered by the old one. A failed start (vLLM's,
        # while vllm-prestart.sh frees the GPUs Ray kept) is retried by systemd; with the wait
        # on, the wait judges the whole cluster: vLLM needs every node's Ray to answer.
        user_systemctl(
            name=f"{verb.capitalize()} {service}",
            user=user,
            args=[verb, service],
            retried_by_systemd=host.data.halo_serve_wait,
            _if=no_node_refused() if service == VLLM else None,
        )
    return verb is not None


def no_node_refused() -> Callable[[], bool]:
    """For vLLM's start, checked when it would run (every node planned by then, in pyinfra's
    order): vLLM needs every node, so while any node was refused (a worker's RDMA port, its
    safety checks) the head does not start it and says why."""
    state, prefix = ctx_state.get(), host.print_prefix

    def check() -> bool:
        refused = sorted({event["node"] for event in events(state, "refused")})
        if refused:
            logger.warning(f"{prefix}vLLM not started: refused in this run: {', '.join(refused)}")
        return not refused

    return check


def _wait_until_serving(acted: bool) -> None:
    """Wait for /health when this run started or changed something, or vLLM does not answer;
    a converged, healthy cluster is only reported (so a re-run plans no change)."""
    data = host.data
    url = health_url(data)
    if not acted and cached(host, HttpStatus, url=f"{url}/health") == 200:
        logger.info(f"{host.print_prefix}serving {data.halo_serve_served_model_name} at {url}")
        return
    wait_for_health(
        name="Wait for vLLM's /health",
        _if=no_node_refused(),
        user=data.halo_cluster_user,
        url=url,
        model=data.halo_serve_served_model_name,
        timeout=data.halo_serve_ready_timeout,
        services=[VLLM, RAY],
        nodes=[data.halo_head_address, *data.halo_worker_addresses],
    )

"""The services' lifecycle on a node: write their files, stop and remove what is not wanted (and
a former cluster user's), restart the user's manager when it lacks groups or limits, start what
is not running and restart what changed, then wait for vLLM's /health. The operations are in
services.py; this decides which run."""

from __future__ import annotations

import shlex
from collections.abc import Callable

from pyinfra import host, logger
from pyinfra.operations import server

from halo_cluster.config.serving import warmup_after_health
from halo_cluster.node import image as cluster_image
from halo_cluster.node import report
from halo_cluster.node.groups import device_groups
from halo_cluster.node.image import ContainerImages
from halo_cluster.node.nodefiles import cached
from halo_cluster.node.operations import text_file
from halo_cluster.node.pyinfra_internals import run
from halo_cluster.node.report import events
from halo_cluster.roles.serve.facts import HttpStatus, UserManager, UserUnits
from halo_cluster.roles.serve.files import (
    BY_NAME,
    RAY,
    UNITS,
    VLLM,
    paths,
    reloads,
    restarted_by,
)
from halo_cluster.roles.serve.services import (
    remove_user_services,
    stop_user_services,
    user_systemctl,
    wait_for_health,
)
from halo_cluster.roles.serve.usermanager import needs_reexec, stale_because


def write(user: str, snapshot, where: dict[str, str], wanted: dict[str, str]) -> dict[str, bool]:
    """Write every wanted file with its mode from the table; which of them change."""
    changed = {}
    for name, text in wanted.items():
        entry = BY_NAME[name]
        changed[name] = snapshot.differs(where[name], text, entry.mode)
        text_file(
            name=f"{'Secrets' if entry.secret else 'Service file'} {where[name]}",
            path=where[name],
            text=text,
            mode=entry.mode,
            owner=user,
            secret=entry.secret,
        )
    return changed


def remove(user: str, snapshot, paths: list[str], services: list[str], what: str) -> None:
    """Stop `services` and remove those of `paths` that exist (nothing when none does)."""
    present = [path for path in paths if snapshot.exists(path)]
    if present:
        remove_user_services(
            name=f"Stop and remove {what}", user=user, services=services, paths=present
        )


def remove_other_users_services(
    user: str, snapshot, extra_services: tuple[str, ...], extra_files: tuple[str, ...]
) -> None:
    """Another user's Ray or vLLM of ours (an earlier `cluster_user`) would hold Ray's ports and
    answer /health in place of the configured cluster: stop it and remove its files, with every
    other quadlet of ours there (the metrics role's) and `extra_services` and `extra_files` (the
    watchdog's, below its home). Its lingering and its other files stay: they are that user's."""
    own = snapshot.home(user) or f"/home/{user}"
    homes = {
        path.split(f"/{UNITS}/")[0]
        for path in snapshot.files
        if path.endswith(".container") and f"/{UNITS}/halo-" in path
    }
    for home in sorted(homes - {own}):
        other = snapshot.user_of_home(home)
        if other:
            # every quadlet of ours there (Ray's, vLLM's, the metrics role's) and the watchdog
            quadlets = sorted(
                p
                for p in snapshot.files
                if p.startswith(f"{home}/{UNITS}/halo-") and p.endswith(".container")
            )
            names = [q.rpartition("/")[2].removesuffix(".container") for q in quadlets]
            own_files = [*paths().values(), *extra_files]
            remove_user_services(
                name=f"Stop and remove {other}'s cluster services (cluster_user is {user})",
                user=other,
                services=sorted({VLLM, RAY, *names}) + list(extra_services),
                paths=sorted({*(f"{home}/{path}" for path in own_files), *quadlets}),
            )


def refresh_user_manager(user: str, snapshot) -> bool:
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


def start_or_restart(user: str, vllm: bool, changed: dict[str, bool]) -> bool:
    """Start what is not running, restart what changed or runs another image than the cluster's
    (vLLM also when Ray did); True when anything was."""
    units = cached(host, UserUnits, user=user, units=(RAY, VLLM))
    if reloads(changed):
        user_systemctl(name="Reload the user's units", user=user, args=["daemon-reload"])
    other = other_images(user)
    ray_changed = RAY in other or any(changed.get(n) for n in restarted_by(RAY))
    # vLLM serves on while everything before this runs (an upgrade's downtime is the restart
    # alone); stopped here, before the workers' and its own Ray restart under it, it does not
    # crash and come back by Restart=always against a Ray cluster still half restarted. Only
    # where it is started again: the cluster's image here, no node refused.
    stops_vllm = vllm and ray_changed and running(units.get(VLLM))
    image = required_image()  # Ray's stops and its start: only on the cluster's image
    stop_user_services(name=f"Stop {VLLM} for Ray's restart", user=user,
                       services=[VLLM] if stops_vllm else [], required_image=image,
                       _if=no_node_refused(say=False) if stops_vllm else None)  # fmt: skip
    # a worker's Ray drains through the head's GCS in about a second while that is up, and
    # waits out its stop bound when the head's Ray stops beside it (ray.STOP_SECONDS)
    first = host.data.halo_role != "head" and ray_changed and running(units.get(RAY))
    stop_user_services(name=f"Stop the workers' {RAY} before the head's", user=user,
                       services=[RAY] if first else [], required_image=image)  # fmt: skip
    acted = _ensure(user, RAY, ray_changed, units.get(RAY), image)
    if vllm:
        vllm_changed = ray_changed or VLLM in other
        vllm_changed = vllm_changed or any(changed.get(n) for n in restarted_by(VLLM))
        acted = _ensure(user, VLLM, vllm_changed, units.get(VLLM)) or acted
    return acted


def other_images(user: str) -> set[str]:
    """The containers of ours running another image than the cluster's (changed by hand, or
    left from before the lock): each said in one line and recorded for drift; restarting them
    from their unit is the repair."""
    pinned = cluster_image.pinned(host)
    running = cached(host, ContainerImages, user=user, containers=(RAY, VLLM))
    other = {name: found for name, found in running.items() if found["reference"] != pinned}
    for name, found in other.items():
        logger.warning(
            f"{host.print_prefix}{name} runs {found['reference']}, the cluster {pinned}: "
            "restarted on the cluster's digest"
        )
        report.record(
            host, "image-mismatch", container=name, running=found["reference"], cluster=pinned
        )
    return set(other)


def running(state: str | None) -> bool:
    return state in ("active", "activating", "reloading")


def _ensure(
    user: str,
    service: str,
    changed: bool,
    state: str | None,
    required_image: tuple[str, str] | None = None,
) -> bool:
    up = running(state)
    verb = "restart" if changed and up else "start" if not up else None
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
            required_image=required_image,
            _if=no_node_refused() if service == VLLM else None,
        )
    return verb is not None


def required_image(service: str = RAY) -> tuple[str, str]:
    """Ray (a native rank: `service`) starts only on the cluster's image: the image, and the
    line its start fails with when the image is not on this node (naming the node, the
    cluster's digest and the head's)."""
    pinned = cluster_image.pinned(host) or ""
    head = cluster_image.head_host()
    user = head.data.halo_cluster_user
    found = cached(head, ContainerImages, user=user, containers=(RAY, VLLM)).get(service)
    head_runs = (found["reference"] if found else pinned).partition("@")[2] or "no image"
    digest = pinned.partition("@")[2]
    what = "Ray" if service == RAY else f"its {service} rank"
    line = (
        f"{host.data.halo_node}: image {digest} (cluster) is not present (its pull failed): "
        f"{what} not started; the head runs {head_runs}"
    )
    return pinned, line


def no_node_refused(say: bool = True) -> Callable[[], bool]:
    """For vLLM's start, checked when it would run (every node planned by then, in pyinfra's
    order): vLLM needs every node, so while any node was refused (a worker's RDMA port, its
    safety checks) the head does not start it and (`say`) says why."""
    state, prefix = run(), host.print_prefix

    def check() -> bool:
        refused = sorted({event["node"] for event in events(state, "refused")})
        if refused and say:
            logger.warning(f"{prefix}vLLM not started: refused in this run: {', '.join(refused)}")
        return not refused

    return check


def wait_until_serving(acted: bool) -> None:
    """Wait for /health when this run started or changed something, or vLLM does not answer;
    a converged, healthy cluster is only reported (so a re-run plans no change). With
    `serve.launcher: native` there is no Ray to ask which nodes are in: the head's world is
    (node/vllmworld.py)."""
    data = host.data
    ray = data.halo_serve_launcher == "ray"
    url = data.halo_serve_head_url
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
        services=[VLLM, RAY] if ray else [VLLM],
        nodes=[data.halo_head_address, *data.halo_worker_addresses],
        native=None if ray else (data.halo_serve_gpus, data.halo_serve_master_port),
        warmup=warmup_after_health(1),  # the one served model
    )

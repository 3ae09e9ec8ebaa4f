"""Cluster services: Ray on every node and `vllm serve` on the head, or with `serve.launcher:
native` one `vllm serve` rank per node (ranks.py), as rootless podman quadlets of the lingering
cluster user, started at boot by the user's systemd; on `serve.enabled: false` stopped and
removed, and the other launcher's services likewise.

This module is the order of things and the one gate that decides whether vLLM may start; Ray's
and vLLM's files are in ray.py and vllm.py, the files' table in files.py, the lifecycle (write,
remove, restart, wait for /health) in lifecycle.py."""

from __future__ import annotations

from typing import Any

from pyinfra import host, logger
from pyinfra.api import deploy

from halo_cluster.decide.preflight import Check
from halo_cluster.decide.safety import e810_ports
from halo_cluster.node import image as cluster_image
from halo_cluster.node.context import NodeContext
from halo_cluster.node.image import ContainerImages
from halo_cluster.node.nodefiles import cached, node_files
from halo_cluster.node.report import fail
from halo_cluster.roles.serve import (
    budget,
    controller,
    fit,
    lifecycle,
    membership,
    ranks,
    ray,
    vllm,
    watchdog,
    weights,
)
from halo_cluster.roles.serve.facts import (
    HttpStatus,
    RdmaLinks,
    UserManager,
    UserUnits,
)
from halo_cluster.roles.serve.files import RAY, UNITS, VLLM, VLLM_FILES
from halo_cluster.roles.serve.files import paths as service_files
from halo_cluster.roles.serve.transport import rdma_port_problem
from halo_cluster.roles.serve.watchdog import WATCHDOG

render = ray.render  # templates/serve/

ORDER = 95  # after the reboot role: a cluster ends its deploy serving, not rebooting
PACKAGES = ("curl", "rsync")  # rsync: the model copied from the head (serve.download: once)
# any user's quadlets of ours (Ray's, vLLM's, the metrics role's): what an earlier cluster_user
# left running (removed as leftovers)
ANY_USERS_UNITS = (f"/home/*/{UNITS}/halo-*.container",)
# each service's unit: a node that no longer runs the service stops it before its files go
UNIT_FILES = ((VLLM, "vllm_unit"), (RAY, "ray_unit"))


def paths(data) -> tuple[str, ...]:
    own = tuple(
        f"~{data.halo_cluster_user}/{p}" for p in (*service_files().values(), *watchdog.PATHS)
    )
    return (*own, *ANY_USERS_UNITS)


def reads(data) -> tuple[tuple[type, dict], ...]:
    """The user's manager and services, and on a waiting head vLLM's /health: what a serving
    node reads (the /health answer only when nothing was started, a no-op's case); on the head,
    serving or not, whether the nodes that left still run our services."""
    departed = membership.read(data)
    model = fit.read(data)  # the head's read of the model's config.json, before any download
    extra = tuple(r for r in (departed, model) if r)
    return extra + _serving_reads(data) + watchdog.reads(data)


def preflight(node_host: Any, node: NodeContext) -> list[Check]:
    """Whether serve.model fits (fit.py): refused here, before any role changes a node and
    before any byte of the model is downloaded (`node` unread: the head's reading is used)."""
    return fit.check(node_host)


def _serving_reads(data) -> tuple[tuple[type, dict], ...]:
    if not data.halo_serve_enabled:
        return ()
    user = data.halo_cluster_user
    found = ((UserManager, {"user": user}), (UserUnits, {"user": user, "units": (RAY, VLLM)}))
    found += ((ContainerImages, {"user": user, "containers": (RAY, VLLM)}),)  # which digest runs
    found += (budget.read(data),)  # the model's weights: the memory budget (with NodeMemory)
    found += (weights.read(data),)  # the model's files: copied, fetched or checked
    if data.halo_role == "head" and data.halo_serve_wait:
        found += ((HttpStatus, {"url": f"{data.halo_serve_head_url}/health"}),)
    if data.halo_serve_transport == "rdma":
        found += ((RdmaLinks, {}),)
    return found


@deploy("Cluster services")
def apply(node: NodeContext) -> None:
    user = host.data.halo_cluster_user
    snapshot = node_files(host)
    home = snapshot.home(user) or f"/home/{user}"
    where = {name: f"{home}/{path}" for name, path in service_files().items()}
    lifecycle.remove_other_users_services(user, snapshot, (WATCHDOG,), watchdog.PATHS)
    controller.record()  # the token first: every node's Ray restarts with the one it writes
    membership.leave(user)  # before Ray restarts: a departed node never rejoins the new cluster
    if not host.data.halo_serve_enabled:
        every = [*where.values(), *watchdog.where(home).values()]
        lifecycle.remove(user, snapshot, every, [VLLM, RAY, WATCHDOG], "the cluster services")
        return
    watchdog.apply(user, snapshot, home)  # idle until /health answers 200: before the restarts
    if cluster_image.pinned(host) is None:  # refused by the container role: no other build runs
        return
    head = host.data.halo_role == "head"
    port_refused = _rdma_port_refused(node)  # a refused node runs Ray, never vLLM
    # every node's memory budget and model, on the head before vLLM starts: refused, vLLM's
    # files are left as they are and it is neither started nor restarted (docs/roles/serve.md)
    over_budget = budget.check() if head else []
    absent = weights.missing() if head else []
    fits = not (over_budget or absent or port_refused)  # the gate: may vLLM start?
    native = not ray.launches(host.data)
    runs_vllm = head or native  # with native every node runs a rank
    wanted, ray_context = ray.files(node)
    if fits and runs_vllm:
        wanted |= vllm.files(ray_context)
    changed = lifecycle.write(user, snapshot, where, wanted)
    unwanted = [where[n] for n in where if n not in wanted and (fits or n not in VLLM_FILES)]
    # a refused node's vLLM is left as it is, like its files
    stopped = [
        s for s, unit in UNIT_FILES if unit not in wanted and (s != VLLM or fits or not runs_vllm)
    ]
    lifecycle.remove(user, snapshot, unwanted, stopped, "what this node no longer runs")
    if not over_budget:  # a refused model is neither fetched nor copied
        weights.fetch(changed["model"])
    restarted = lifecycle.refresh_user_manager(user, snapshot)
    if over_budget:
        fail(host, budget.refusal(over_budget))
    if absent:
        fail(host, weights.refusal(absent))
    serves = fits and runs_vllm
    if native:
        acted = ranks.start_or_restart(user, serves, changed) or restarted
    else:
        acted = lifecycle.start_or_restart(user, serves, changed) or restarted
    serves = serves and head
    if serves and host.data.halo_serve_wait:
        lifecycle.wait_until_serving(acted or any(changed.values()))


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
    links = cached(host, RdmaLinks)
    problem = rdma_port_problem(node.data_interface, node.rdma_device, links, loading)
    if problem:
        fail(host, problem)
    return problem is not None

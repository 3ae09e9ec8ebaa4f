"""`serve.launcher: native`: every node's `halo-vllm` is one rank of one vLLM world, and the ranks
start and restart together. vLLM's rendezvous on the head's master port admits each rank once: a
headless rank neither exits nor rejoins when the head restarts (upstream vllm#32136), and a rank
that restarts alone is held by the running head's store until its own timeout. So when one rank
must (re)start, every rank stops (one operation on every node), then every rank starts (the next
one): the start order is free within vLLM's rendezvous window (vllm/distributed/parallel_state.py:
init_distributed_environment), and all at once is well inside it.

Why a rank (re)starts is found on each node: its own changed files, its reboot in this run (the
reboot role's, before this one: its rank comes back at boot alone, into the world of ranks that
did not reboot, and a head that reboots last finds the others' ranks held by the world it left),
and what every reachable node read (a rank not running, one on another image than the
cluster's, Ray still running: a switch of launcher), the same on every node. pyinfra plans the
nodes side by side, so a node's own reason is recorded for the run, and the two operations,
planned on every node, act when they run (every node planned by then) if any node recorded one:
the plan and a dry run show them on the nodes with a reason of their own."""

from __future__ import annotations

import weakref
from collections.abc import Callable

from pyinfra import host, logger
from pyinfra.api import operation

from halo_cluster.decide import cmdline
from halo_cluster.decide.cmdline import PROC_CMDLINE
from halo_cluster.node import image as cluster_image
from halo_cluster.node.facts import as_user
from halo_cluster.node.image import ContainerImages
from halo_cluster.node.nodefiles import cached, node_files
from halo_cluster.node.pyinfra_internals import run
from halo_cluster.node.versions import running_kernel_args
from halo_cluster.roles.serve.facts import UserUnits
from halo_cluster.roles.serve.files import BY_NAME, RAY, VLLM, reloads
from halo_cluster.roles.serve.lifecycle import (
    no_node_refused,
    other_images,
    required_image,
    running,
)
from halo_cluster.roles.serve.peers import nodes
from halo_cluster.roles.serve.services import image_present, user_systemctl

# per run: the nodes whose ranks must (re)start, and why
_DUE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def start_or_restart(user: str, serves: bool, changed: dict[str, bool]) -> bool:
    """Plan the stop of every rank, then the start of every rank, acting when any node has a
    reason; True when this node has one."""
    if reloads(changed):
        user_systemctl(name="Reload the user's units", user=user, args=["daemon-reload"])
    if not serves:
        return False
    why = _why(user, changed)
    state, node = run(), host.data.halo_node
    if why:
        _DUE.setdefault(state, {})[node] = why
        logger.info(f"{host.print_prefix}every rank restarts together: {why}")

    def due() -> bool:
        return due_now(_DUE.get(state, {}), node, state.is_executing)

    image = required_image(VLLM)
    every_rank(name=f"Stop every rank's {VLLM}, to start them together", user=user,
               verb="stop", due=due, required_image=image)  # fmt: skip
    every_rank(
        name=f"Start every rank's {VLLM}",
        user=user,
        verb="start",
        due=due,
        required_image=image,
        retried_by_systemd=host.data.halo_serve_wait,
        _if=no_node_refused(),
    )
    return bool(why)


def due_now(reasons: dict[str, str], node: str, executing: bool) -> bool:
    """Whether this node's rank stops and starts: while the run executes (every node planned),
    when any node has a reason; while it is planned, when this one has its own."""
    return bool(reasons) if executing else node in reasons


@operation(is_idempotent=False)
def every_rank(
    user: str,
    verb: str,
    due: Callable[[], bool],
    required_image: tuple[str, str],
    retried_by_systemd: bool = False,
):
    """
    Stop or start this node's vLLM rank, as one step of every rank's, when ``due()`` says so
    (asked when the operation is planned and again when it runs).

    + user: the cluster user
    + verb: ``stop`` or ``start``
    + due: whether the ranks restart in this run
    + required_image: (image, line): nothing runs, and the start fails with the line, when the
      image is not in the user's storage
    + retried_by_systemd: a failed start is left to the unit's ``Restart=`` and the wait

    **Example:**

    .. code:: python

        every_rank(name="Stop every rank", user="vllm", verb="stop", due=lambda: True,
                   required_image=("IMAGE@sha256:...", "the image is missing"))
    """
    if not due():
        return
    yield image_present(user, required_image)
    command = as_user(user, f"systemctl --user {verb} {VLLM}")
    if retried_by_systemd:
        command += " || echo 'the start failed: systemd tries again (Restart=always)'"
    yield command


def reboots() -> bool:
    """This node reboots in this run: the reboot role's own test (`reboot: if-needed`, kernel
    arguments not active in /proc/cmdline)."""
    if host.data.halo_reboot != "if-needed":
        return False
    running = node_files(host).text(PROC_CMDLINE) or ""
    return bool(cmdline.missing_args(running, *running_kernel_args(host)))


def _why(user: str, changed: dict[str, bool]) -> str:
    """Why the ranks (re)start, as this node sees it ("" when they run on as they are)."""
    files = sorted(n for n, c in changed.items() if c and BY_NAME[n].restarts)
    if files:
        return f"its {', '.join(files)} changed"
    if VLLM in other_images(user):
        return f"its {VLLM} runs another image"
    if reboots():
        return "it reboots in this run (reboot: if-needed)"
    pinned = cluster_image.pinned(host)
    for node in nodes():
        name = node.data.halo_node
        units = cached(node, UserUnits, user=node.data.halo_cluster_user, units=(RAY, VLLM))
        if not running(units.get(VLLM)):
            return f"{name}'s {VLLM} is {units.get(VLLM) or 'not there'}"
        if running(units.get(RAY)):
            return f"{name} still runs {RAY} (the launcher changes)"
        images = cached(node, ContainerImages, user=node.data.halo_cluster_user,
                        containers=(RAY, VLLM))  # fmt: skip
        found = images.get(VLLM)
        if found and found["reference"] != pinned:
            return f"{name}'s {VLLM} runs another image"
    return ""

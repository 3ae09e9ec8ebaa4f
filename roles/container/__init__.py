"""The gfx1151 vLLM image and its toolbox, rootless for the cluster user, as upstream does it;
every node on the cluster's one digest (the lock beside cluster.yml, docs/roles/container.md)."""

from pathlib import Path

from pyinfra import host, logger
from pyinfra.api import deploy

from halo_cluster.config import lock as locks
from halo_cluster.config.docs import page
from halo_cluster.node import image as cluster_image
from halo_cluster.node import toolbox as toolbox_files
from halo_cluster.node.context import NodeContext
from halo_cluster.node.nodefiles import STORAGE, node_files
from halo_cluster.node.operations import text_file
from halo_cluster.node.pyinfra_internals import dry_run
from halo_cluster.node.report import SKOPEO_PENDING, fail, record
from halo_cluster.roles.container.operations import (
    pull_image,
    record_head,
    record_image,
    toolbox_container,
)

ORDER = 60
# skopeo: the head resolves the configured reference to the cluster's digest
PACKAGES = ("podman", "toolbox", "skopeo")


def paths(data) -> tuple[str, ...]:
    """The toolbox's record and the image storage's indexes; while the head moves, the history
    on the old head (carried) and on the new one (replaced)."""
    home = f"~{data.halo_cluster_user}"
    moving = data.halo_container_moved_from and (
        data.halo_role == "head" or data.halo_node == data.halo_container_moved_from
    )
    return (
        f"{home}/{toolbox_files.state_file(data.halo_toolbox)}",
        f"{home}/{STORAGE}/*-images/images.json",
        f"{home}/{STORAGE}/*-containers/containers.json",
        *((f"{home}/{locks.HISTORY}",) if moving else ()),
    )


def reads(data) -> tuple[tuple[type, dict], ...]:
    """On the head: its history of the image, and while the lock records no digest, the
    registry's answer for cluster.yml's `image`."""
    return cluster_image.reads(data) if data.halo_role == "head" else ()


@deploy("Image and toolbox")
def apply(node: NodeContext) -> None:
    user, name = host.data.halo_cluster_user, host.data.halo_toolbox
    found = cluster_image.resolved(host)
    if found.digest is None:
        if found.skopeo_missing:
            record(host, SKOPEO_PENDING, reason=found.error)
        fail(host, found.error)
        return
    image = cluster_image.pinned(host) or ""
    if host.data.halo_image_update:
        logger.warning(
            f"{host.print_prefix}image_update: a deploy never moves the cluster to another "
            f"build; this run keeps {found.digest} (`halo-cluster deploy` upgrades after it: "
            f"{page('roles/container.md')})"
        )
    files = node_files(host)
    image_id = files.image_id(user, image)
    if image_id is None:
        pull_image(name=f"Pull {image} as {user}", user=user, image=image)
    head = host.data.halo_role == "head"
    recording = head and not host.data.halo_container_locked
    if head and host.data.halo_container_moved_from:
        _move_head(found.digest)
    if recording and found.adopted:
        _adopt(image)
    elif recording:
        record_image(
            name=f"Record {found.digest} in {host.data.halo_container_lock}",
            user=user,
            lock=host.data.halo_container_lock,
            head=host.data.halo_node,
            reference=host.data.halo_image,
            image=image,
            members=host.data.halo_container_members,
        )

    options = toolbox_files.options(node.has_infiniband)
    current = (
        image_id is not None
        and files.container_image(user, name) == image_id
        and (files.user_file(user, toolbox_files.state_file(name)) or "").strip()
        == toolbox_files.record(image_id, options)
    )
    if not current:
        toolbox_container(
            name=f"Toolbox {name} from {image}",
            user=user,
            toolbox=name,
            image=image,
            options=options,
        )


def _adopt(image: str) -> None:
    """A checkout without the lock takes the head's digest: written while the run is planned
    (no node changes, so drift stays 0), except in a dry run, which writes nothing beside
    cluster.yml either: it says that the next deploy records it."""
    data = host.data
    recorded = cluster_image.recorded(host)
    lock = locks.Lock(
        data.halo_node,
        data.halo_image,
        recorded.digest,
        recorded.time,
        recorded.ray,
        recorded.vllm,
        members=locks.members_of(data.halo_container_members),
    )
    if dry_run():
        logger.info(
            f"{host.print_prefix}{Path(data.halo_container_lock).name}: none yet: the next "
            f"deploy records the head's {image}"
        )
        return
    # a lock written since this run's load (another command's) is kept: it knows more
    _, problems = locks.update(Path(data.halo_container_lock), lambda found: found or lock)
    if problems:
        fail(host, problems[0])
        return
    logger.info(
        f"{host.print_prefix}lock adopted from the head: {image} (written to "
        f"{data.halo_container_lock})"
    )


def _move_head(digest: str) -> None:
    """The head moved to this node: the old head's history is written here with a `moved-head`
    line after it (replacing what this node had: a history carried from here before is inside
    it), then the lock records this node as the head. Without the old head in this run (it
    left the config) the line follows this node's own history: the lock's digest, so that the
    history agrees with the lock from now on."""
    data = host.data
    user, moved_from = data.halo_cluster_user, data.halo_container_moved_from
    old = cluster_image.old_head(moved_from)
    files = node_files(host)
    carried = (
        cluster_image.old_history(old, user)
        if old is not None
        else files.user_file(user, locks.HISTORY) or ""
    )
    line = locks.history_line(
        cluster_image.MOVED_HEAD,
        reference=data.halo_image,
        digest=digest,
        to=data.halo_node,
        carried=old is not None,
        **{"from": moved_from},
    )
    home = files.home(user) or f"/home/{user}"
    text_file(
        name=f"The head's history, from {moved_from}",
        path=f"{home}/{locks.HISTORY}",
        text=carried + ("" if not carried or carried.endswith("\n") else "\n") + line + "\n",
        mode="644",
        owner=user,
    )
    record_head(
        name=f"Record {data.halo_node} as the head in {data.halo_container_lock}",
        lock=data.halo_container_lock,
        head=data.halo_node,
        moved_from=moved_from,
    )

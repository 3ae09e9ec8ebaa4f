"""The container role's key (`image_update`: `halo-cluster deploy` upgrades after it) and its
derivation: the cluster's one image digest, read from the lock beside cluster.yml
(`halo_cluster/config/lock.py`), the refusals of a lock that does not belong to this config,
the cluster's members (a node removed from cluster.yml moves to the lock's `left`, which the
head's serve role takes out of the cluster and records when the deploy runs: loading the config
writes nothing), and a head that moved to another of them (`moved_from`: the deploy carries the
head's history and the lock's `head`)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from halo_cluster.config import lock as locks
from halo_cluster.config.model import Cluster, Problems
from halo_cluster.config.rules import image_digest, image_name
from halo_cluster.config.schema import Field, variables

SECTION: tuple[Field, ...] = (
    Field(
        "image_update",
        "boolean",
        False,
        "Move the cluster to the image's newest build after the deploy: `halo-cluster deploy` "
        "then runs `halo-cluster upgrade` (gated, rolled back on failure: "
        "docs/roles/container.md); the deploy itself keeps the lock's digest and says so.",
    ),
)
# host data it reads beyond its section: other sections' keys, values hostdata.py derives
READS = (
    "halo_cluster_user",
    "halo_image",
    # what derive() below gives, from the lock
    "halo_container_digest",
    "halo_container_pinned",
    "halo_container_locked",
    "halo_container_lock",
    "halo_container_members",
    "halo_container_left",
    "halo_container_moved_from",
    "halo_node",
    "halo_role",
    "halo_toolbox",
)
VARIABLES = variables(SECTION, READS)


@dataclass(frozen=True)
class Container:
    """`cluster.container`: the image every node runs (host data `halo_container_FIELD`)."""

    reference: str  # cluster.yml's `image`, as written
    digest: str  # the cluster's digest; "" until the head's first resolve
    pinned: str  # NAME@DIGEST, what the quadlets, the toolbox and the pull name; "" likewise
    locked: bool  # the lock records this digest already (nothing to record)
    lock: str  # its path (lock.found): the state folder's, else the old one beside cluster.yml
    head: str  # the head's name, recorded in the lock
    members: dict[str, str]  # the config's nodes: {name: data address}, recorded in the lock
    left: dict[str, str]  # nodes that left cluster.yml (the lock's `left`, with this load's)
    leaving: tuple[str, ...]  # the names this load moves to `left` (the Ray token rotates)
    # the lock's members or `left` are not yet the config's: the next deploy records them
    unrecorded: bool
    # the lock's head when the config's head is another node of the same cluster (a head move:
    # the deploy carries the history there and records the new head); "" otherwise
    moved_from: str = ""


def derive(cluster: Cluster, problems: Problems, base_dir: Path) -> Container:
    # the state folder's lock, else the one beside the config until a deploy moves it
    path = locks.found(base_dir)
    found, lock_problems = locks.read(path)
    problems.lines.extend(lock_problems)
    head = next((n.name for n in cluster.nodes if n.role == "head"), "")
    digest = image_digest(cluster.image) or ""
    left: tuple[locks.Departed, ...] = ()
    leaving: list[str] = []
    moved_from = ""
    if found is not None:
        moved_from = _check_lock(found, cluster, head, path, problems)
        digest = found.digest
        left, leaving = locks.moved(found, members(cluster))
    # while a lock exists, its reference's name: what the nodes really run, also after `image`
    # moved to another repository name (then `halo-cluster upgrade` moves them, and its converged
    # check must find them as they are)
    named = found.reference if found is not None else cluster.image
    pinned = f"{image_name(named)}@{digest}" if digest else ""
    locked = found is not None and found.digest == digest
    return Container(
        cluster.image,
        digest,
        pinned,
        locked,
        str(path),
        head,
        members={m.name: m.data_address for m in members(cluster)},
        left={d.name: d.data_address for d in left},
        leaving=tuple(leaving),
        unrecorded=found is not None and (found.members, found.left) != (members(cluster), left),
        moved_from=moved_from,
    )


def members(cluster: Cluster) -> tuple[locks.Member, ...]:
    return tuple(locks.Member(n.name, n.address) for n in cluster.nodes)


def _check_lock(
    found: locks.Lock, cluster: Cluster, head: str, path: Path, problems: Problems
) -> str:
    """The lock must be this cluster's and of this image: cluster.yml's `image` as the lock
    records it, or its name at the lock's digest. A lock is this cluster's when the config names
    its head or one of its members; a config whose head is another node is a head move (the
    lock's head returned, "" when the head stays): only a lock none of whose nodes the config
    names is another cluster's."""
    moved_from = ""
    if head and found.head != head:
        recorded = {found.head, *(m.name for m in found.members)}
        if recorded & {n.name for n in cluster.nodes}:
            moved_from = found.head
        else:
            problems.lines.append(
                f"{path}: the lock of another cluster (head {found.head}): one cluster per folder"
            )
    image = cluster.image
    if os.environ.get(locks.UPGRADING):
        return moved_from  # the upgrade's own deploy: it moves the lock itself (tools/upgrade)
    if found.trial:
        back = found.previous.digest if found.previous else "the previous build"
        problems.lines.append(
            f"{path}: the upgrade to {found.digest} was not gated (interrupted): `halo-cluster "
            f"upgrade` gates it, `halo-cluster rollback` returns to {back}"
        )
    same = image == found.reference or image == f"{image_name(found.reference)}@{found.digest}"
    if not same:
        problems.error(
            "image",
            f"changed from {found.reference} to {image}: {path.name} pins {found.digest}; "
            f"`halo-cluster upgrade` moves the cluster to {image} (pulled, switched and gated, "
            "rolled back on failure), or set image back",
        )
    return moved_from

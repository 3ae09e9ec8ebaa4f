"""The container role's operations: pull the image, make the user's toolbox from it, record the
cluster's digest in the lock and the head's history."""

from __future__ import annotations

import shlex
from dataclasses import replace
from pathlib import Path

from pyinfra import logger
from pyinfra.api import FunctionCommand, operation

from halo_cluster.config import lock as locks
from halo_cluster.config.rules import image_digest
from halo_cluster.node import toolbox as toolbox_files
from halo_cluster.node.facts import CONTAINER_IMAGE, IMAGE_ID, as_user
from halo_cluster.node.image import history_append, versions_command
from halo_cluster.node.operations import run_saying_what
from halo_cluster.node.progress import pull_measure

# what `record_image` writes into a lock another command wrote since this run's load
FIRST_RECORD = ("head", "reference", "digest", "resolved", "ray", "vllm", "members")


@operation(is_idempotent=False)
def pull_image(user: str, image: str):
    """
    Pull a container image into a user's rootless storage (as upstream does), saying every 15 s
    the bytes fetched of the layers it lacks, the rate and the time left (read from the sizes of
    the blobs podman stages, against the registry's layer sizes), and a pull that fetched nothing
    for 120 s (docs/roles/container.md).

    + user: the cluster user
    + image: image name, tag or ``name@sha256:...`` digest

    **Example:**

    .. code:: python

        pull_image(name="Pull the vLLM image", user="vllm",
                   image="docker.io/kyuz0/vllm-therock-gfx1151:latest")
    """
    command = as_user(user, f"podman pull --quiet {shlex.quote(image)} >/dev/null")
    what = f"podman pull {image} as {user}"
    yield FunctionCommand(run_saying_what, (command, what, pull_measure(user, image)), {})


@operation(is_idempotent=False)
def toolbox_container(user: str, toolbox: str, image: str, options: list[str]):
    """
    Create the user's toolbox from ``image``, or recreate it when the image or the options
    changed since it was made (recorded in the user's ~/.local/state/halo-cluster). The image it
    was made from before stays: an image is never removed by the deploy (the way back).

    + user: the cluster user
    + toolbox: container name
    + image: the image to make it from
    + options: podman options for ``toolbox create NAME --image IMAGE -- OPTIONS``

    **Example:**

    .. code:: python

        toolbox_container(name="Toolbox", user="vllm", toolbox="vllm-therock-gfx1151",
                          image="docker.io/kyuz0/vllm-therock-gfx1151:latest",
                          options=["--device", "/dev/dri"])
    """
    q = shlex.quote
    record = f"~{user}/{toolbox_files.state_file(toolbox)}"
    create = f"toolbox create --assumeyes --image {q(image)} {q(toolbox)} -- "
    create += " ".join(q(o) for o in options)
    yield "\n".join(
        (
            "set -e",
            f"new=$({as_user(user, IMAGE_ID + q(image))})",
            f"old=$({as_user(user, CONTAINER_IMAGE + q(toolbox))} 2>/dev/null || true)",
            f'want="$new {" ".join(options)}"',
            f"have=$(cat {record} 2>/dev/null || true)",
            'if [ "$old" != "$new" ] || [ "$have" != "$want" ]; then',
            f'  [ -z "$old" ] || {as_user(user, f"toolbox rm --force {q(toolbox)}")} >/dev/null',
            f"  {as_user(user, create)} >/dev/null",
            f"  {as_user(user, f'mkdir -p ~{user}/{toolbox_files.STATE_DIR}')}",
            f'  printf "%s\\n" "$want" > {record} && chown {q(user)}: {record}',
            "fi",
        )
    )


@operation(is_idempotent=False)
def record_image(
    user: str, lock: str, head: str, reference: str, image: str, members: dict[str, str]
):
    """
    Record the cluster's digest once it is resolved: the Ray and vLLM versions in the image
    (read on this node, the head, where the image was just pulled), the lock beside cluster.yml
    on the controller (atomically), and a ``resolved`` line in the head's history.

    + user: the cluster user
    + lock: the lock's path on the controller
    + head: the head's name, recorded in the lock
    + reference: cluster.yml's ``image``, as written
    + image: ``NAME@sha256:...``, the digest every node runs
    + members: the cluster's nodes, {name: data address}, recorded in the lock

    **Example:**

    .. code:: python

        record_image(name="Record the digest", user="vllm", lock="/srv/halo/halo-cluster.lock",
                     head="node1", reference="docker.io/kyuz0/vllm-therock-gfx1151:latest",
                     image="docker.io/kyuz0/vllm-therock-gfx1151@sha256:...",
                     members={"node1": "192.168.100.1", "node2": "192.168.100.2"})
    """
    nodes = locks.members_of(members)
    yield FunctionCommand(_record, (user, lock, head, reference, image, nodes), {})


def _record(
    state,
    host,
    user: str,
    lock: str,
    head: str,
    reference: str,
    image: str,
    members: tuple[locks.Member, ...],
) -> bool:
    digest = image_digest(image) or ""
    _, output = host.run_shell_command(versions_command(user, image))
    found = (output.stdout.strip().splitlines() or [""])[-1].split()
    ray, vllm = found if len(found) == 2 else ("", "")
    recorded = locks.Lock(head, reference, digest, locks.now(), ray, vllm, members=members)

    def resolved(found: locks.Lock | None) -> locks.Lock:
        # that lock keeps its other records (pins, left, the builds before)
        if found is None:
            return recorded
        return replace(found, **{name: getattr(recorded, name) for name in FIRST_RECORD})

    _, problems = locks.update(Path(lock), resolved)
    if problems:
        logger.error(f"{host.print_prefix}{lock}: {image} not recorded: {problems[0]}")
        return False
    line = locks.history_line(
        "resolved", reference=reference, digest=digest, changed=True, ray=ray, vllm=vllm
    )
    done, output = host.run_shell_command(history_append(user, line))
    if not done:
        logger.warning(f"{host.print_prefix}history not written: {output.stderr.strip()[-200:]}")
    logger.info(f"{host.print_prefix}the cluster runs {image} (recorded in {lock})")
    return True


@operation(is_idempotent=False)
def record_head(lock: str, head: str, moved_from: str):
    """
    Record a new head in the lock on the controller (atomically), once its history is there:
    the lock as it is when the operation runs, its ``head`` replaced.

    + lock: the lock's path on the controller
    + head: the new head's name
    + moved_from: the head the lock records, said in the log line

    **Example:**

    .. code:: python

        record_head(name="Record node2 as the head", lock="/srv/halo/halo-cluster.lock",
                    head="node2", moved_from="node1")
    """
    yield FunctionCommand(_record_head, (lock, head, moved_from), {})


def _record_head(state, host, lock: str, head: str, moved_from: str) -> bool:
    def moved(found: locks.Lock | None) -> locks.Lock | None:
        return None if found is None else replace(found, head=head)

    written, problems = locks.update(Path(lock), moved)
    if written is None:
        said = "; ".join(problems) or "no lock"
        logger.error(f"{host.print_prefix}{lock}: cannot record the head: {said}")
        return False
    logger.info(f"{host.print_prefix}the head moved from {moved_from} (recorded in {lock})")
    return True

"""The container role's operations: pull the image, make the user's toolbox from it."""

from __future__ import annotations

import shlex

from pyinfra.api import FunctionCommand, operation

from halo_cluster.node import toolbox as toolbox_files
from halo_cluster.node.facts import CONTAINER_IMAGE, IMAGE_ID, as_user
from halo_cluster.node.operations import run_saying_what


@operation(is_idempotent=False)
def pull_image(user: str, image: str):
    """
    Pull a container image into a user's rootless storage (as upstream does), saying every few
    seconds how long the pull of a multi-gigabyte image has taken so far.

    + user: the cluster user
    + image: image name, tag or ``name@sha256:...`` digest

    **Example:**

    .. code:: python

        pull_image(name="Pull the vLLM image", user="vllm",
                   image="docker.io/kyuz0/vllm-therock-gfx1151:latest")
    """
    command = as_user(user, f"podman pull --quiet {shlex.quote(image)} >/dev/null")
    yield FunctionCommand(run_saying_what, (command, f"podman pull {image} as {user}"), {})


@operation(is_idempotent=False)
def toolbox_container(user: str, toolbox: str, image: str, options: list[str]):
    """
    Create the user's toolbox from ``image``, or recreate it when the image or the options
    changed since it was made (recorded in the user's ~/.local/state/halo-cluster); then remove
    the image it was made from before, if that one is no longer the current one.

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
            '  if [ -n "$old" ] && [ "$old" != "$new" ]; then',
            f"    {as_user(user, 'podman rmi $old')} >/dev/null 2>&1 || true",
            "  fi",
            "fi",
        )
    )
